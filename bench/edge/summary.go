package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// summarize returns the Markdown summary: per variant and kind of change,
// the median over the runs of each figure (with the runs' range), and the
// edge variant's endpoint change against the cds-eds variant's.
func summarize(all []result, cfg config) string {
	var b strings.Builder
	proto := "delta ADS"
	if !cfg.delta {
		proto = "SotW ADS"
	}
	fmt.Fprintf(&b, "C=%d clients (%s), N=%d services of %d endpoints; medians of %d runs (range in parentheses). %d CPUs.\n\n",
		cfg.clients, proto, cfg.services, cfg.eps, cfg.runs, runtime.NumCPU())
	b.WriteString("| variant | change | bridge CPU / client·change | load generator CPU / client·change | p50 | p99 | max | bytes / client·change |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	type key struct{ variant, kind string }
	med := map[key]map[string]float64{}
	for _, v := range cfg.variants {
		for _, kind := range []string{"endpoint", "route", "certificate"} {
			var rows []series
			for _, r := range all {
				for _, s := range r.Series {
					if r.Variant == v && s.Kind == kind {
						rows = append(rows, s)
					}
				}
			}
			if len(rows) == 0 {
				continue
			}
			fig := func(f func(series) float64) (float64, string) {
				var xs []float64
				for _, s := range rows {
					xs = append(xs, f(s))
				}
				m := median(xs)
				return m, fmt.Sprintf("(%s–%s)", num(slices.Min(xs)), num(slices.Max(xs)))
			}
			cpu, cpuR := fig(func(s series) float64 { return s.BridgeCPUPerClientChangeUs })
			lg, lgR := fig(func(s series) float64 { return s.LoadgenCPUPerClientChangeUs })
			p50, _ := fig(func(s series) float64 { return s.P50Ms })
			p99, p99R := fig(func(s series) float64 { return s.P99Ms })
			mx, _ := fig(func(s series) float64 { return s.MaxMs })
			var bytes []string
			for _, t := range []string{"cds", "eds", "lds", "rds", "sds"} {
				if v, _ := fig(func(s series) float64 { return s.BytesPerClientChange[t] }); v > 0 {
					bytes = append(bytes, fmt.Sprintf("%s %s B", t, num(v)))
				}
			}
			med[key{v, kind}] = map[string]float64{"cpu": cpu, "p99": p99}
			fmt.Fprintf(&b, "| %s | %s (%d) | %s µs %s | %s µs %s | %s ms | %s ms %s | %s ms | %s |\n", v, kind, rows[0].Changes,
				num(cpu), cpuR, num(lg), lgR, num(p50), num(p99), p99R, num(mx), strings.Join(bytes, ", "))
		}
	}
	if e, ok := med[key{variantEdge, "endpoint"}]; ok {
		if base, ok := med[key{variantCDSEDS, "endpoint"}]; ok && base["cpu"] > 0 && base["p99"] > 0 {
			fmt.Fprintf(&b, "\nEndpoint change, edge against cds-eds: CPU per client·change %.2f×, p99 %.2f× (target ≤ 1.2× each).\n",
				e["cpu"]/base["cpu"], e["p99"]/base["p99"])
		}
	}
	b.WriteString("\n| run | variant | cold start | bridge CPU to cold start | bridge RSS (live heap) after cold start | at the end | load average (1 min) start–end |\n|---|---|---|---|---|---|---|\n")
	for _, r := range all {
		fmt.Fprintf(&b, "| %d | %s | %s ms | %s ms | %.0f MB (%.0f MB) | %.0f MB (%.0f MB) | %.1f–%.1f |\n", r.Run, r.Variant, num(r.ColdStartMs),
			num(r.ColdCPUMs), float64(r.ColdRSS)/1e6, float64(r.ColdLive)/1e6, float64(r.BridgeRSS)/1e6, float64(r.Live)/1e6, r.Load1[0], r.Load1[1])
	}
	return b.String()
}

// num shows a figure with three significant digits at most, no exponent.
func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 1 {
		return v[n/2]
	}
	n := len(v)
	return (v[n/2-1] + v[n/2]) / 2
}
