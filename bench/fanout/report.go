package fanout

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/report"
)

// group is the runs of one scenario point (mode, C, N, ...) across
// implementations.
type group struct {
	key  string
	runs map[string]Result
	impl []string
}

func groups(results []Result, scenario string) []*group {
	var out []*group
	for _, r := range results {
		if r.Scenario != scenario {
			continue
		}
		key := fmt.Sprintf("%s C=%d N=%d", r.Mode(), r.Clients, r.Services)
		if r.Rate > 0 {
			key += fmt.Sprintf(" %g/s", r.Rate)
		}
		if r.Holdoff > 0 {
			key += " holdoff " + r.Holdoff.String()
			if r.MaxHoldoff > 0 {
				key += " max " + r.MaxHoldoff.String()
			}
		}
		i := slices.IndexFunc(out, func(g *group) bool { return g.key == key })
		if i < 0 {
			out = append(out, &group{key: key, runs: map[string]Result{}})
			i = len(out) - 1
		}
		out[i].runs[r.Impl] = r
		out[i].impl = append(out[i].impl, r.Impl)
	}
	return out
}

// metric is one column compared across implementations.
type metric struct {
	name string
	val  func(Result) float64
	fmt  func(Result) string
}

var metrics = []metric{
	{"changes applied / s", func(r Result) float64 { return r.AchievedRate }, func(r Result) string { return fmt.Sprintf("%.0f", r.AchievedRate) }},
	{"server publishes", func(r Result) float64 { return float64(r.Flushes) }, func(r Result) string { return strconv.Itoa(r.Flushes) }},
	{"cold start", func(r Result) float64 { return float64(r.ColdStart) }, func(r Result) string { return report.MS(r.ColdStart) }},
	{"convergence p50", func(r Result) float64 { return float64(r.ConvP50) }, func(r Result) string { return report.MS(r.ConvP50) }},
	{"convergence p99", func(r Result) float64 { return float64(r.ConvP99) }, func(r Result) string { return report.MS(r.ConvP99) }},
	{"convergence max", func(r Result) float64 { return float64(r.ConvMax) }, func(r Result) string { return report.MS(r.ConvMax) }},
	{"convergence p99, first ¼ of the run", func(r Result) float64 { return float64(r.ConvP99First) }, func(r Result) string { return report.MS(r.ConvP99First) }},
	{"convergence p99, last ¼ of the run", func(r Result) float64 { return float64(r.ConvP99Last) }, func(r Result) string { return report.MS(r.ConvP99Last) }},
	{"per-client latency p99", func(r Result) float64 { return float64(r.ClientP99) }, func(r Result) string { return report.MS(r.ClientP99) }},
	{"server CPU / change", func(r Result) float64 { return float64(r.CPUPerChange) }, func(r Result) string { return report.MS(r.CPUPerChange) }},
	{"server CPU / client·change", func(r Result) float64 { return float64(r.CPUPerClientChange) }, func(r Result) string { return report.US(r.CPUPerClientChange) }},
	{"bytes / client·change", func(r Result) float64 { return r.BytesPerClientChange }, func(r Result) string { return report.Size(r.BytesPerClientChange) }},
	{"resources / client·change", func(r Result) float64 { return r.ResPerClientChange }, func(r Result) string { return fmt.Sprintf("%.2f", r.ResPerClientChange) }},
	{"server heap / client", func(r Result) float64 { return r.HeapPerClient }, func(r Result) string { return report.Size(r.HeapPerClient) }},
	{"server RSS / client", func(r Result) float64 { return r.RSSPerClient }, func(r Result) string { return report.Size(r.RSSPerClient) }},
	{"process RSS once quiet", func(r Result) float64 { return float64(r.ServerRSS) }, func(r Result) string { return report.Size(float64(r.ServerRSS)) }},
	{"process RSS right after the changes", func(r Result) float64 { return float64(r.ServerRSSBusy) }, func(r Result) string { return report.Size(float64(r.ServerRSSBusy)) }},
	{"cold-start server CPU", func(r Result) float64 { return float64(r.ColdCPU) }, func(r Result) string { return report.MS(r.ColdCPU) }},
	{"reconnect: all served", func(r Result) float64 { return float64(r.ReconnectTime) }, func(r Result) string { return report.MS(r.ReconnectTime) }},
	{"reconnect: server CPU", func(r Result) float64 { return float64(r.ReconnectCPU) }, func(r Result) string { return report.MS(r.ReconnectCPU) }},
	{"reconnect: bytes / client", func(r Result) float64 { return r.ReconnectBytesClient }, func(r Result) string { return report.Size(r.ReconnectBytesClient) }},
	{"load generator CPU / change", func(r Result) float64 { return float64(r.LoadgenCPUPerChange) }, func(r Result) string { return report.MS(r.LoadgenCPUPerChange) }},
	{"load generator peak RSS", func(r Result) float64 { return float64(r.LoadgenPeakRSS) }, func(r Result) string { return report.Size(float64(r.LoadgenPeakRSS)) }},
}

// Markdown renders one table per scenario point: the implementations side
// by side and xdsbridge's ratio to each baseline (below 1 is better for
// xdsbridge on every metric).
func Markdown(results []Result, machine string) string {
	var b strings.Builder
	b.WriteString("# xdsbridge benchmark results\n\n")
	if machine != "" {
		fmt.Fprintf(&b, "Machine: %s\n\n", machine)
	}
	if w := wallTime(results); w > 0 {
		fmt.Fprintf(&b, "Wall time: %s for %d runs (the sum of the runs' own; a suite adds only building and reporting).\n\n", w.Round(time.Second), len(results))
	}
	results = representatives(results)
	b.WriteString(Targets(results))
	for _, sc := range uniq(results, func(r Result) string { return r.Scenario }) {
		gs := groups(results, sc)
		if len(gs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n", sc)
		if sc == "S4" {
			b.WriteString(sustained(results))
		}
		for _, g := range gs {
			fmt.Fprintf(&b, "### %s %s\n\n", sc, g.key)
			impls := g.impl
			base := slices.DeleteFunc(slices.Clone(impls), func(s string) bool { return s == "xdsbridge" })
			_, hasBridge := g.runs["xdsbridge"]
			b.WriteString("| metric |")
			for _, im := range impls {
				fmt.Fprintf(&b, " %s |", im)
			}
			if hasBridge {
				for _, im := range base {
					fmt.Fprintf(&b, " xdsbridge / %s |", im)
				}
			}
			b.WriteString("\n|---|")
			b.WriteString(strings.Repeat("---:|", len(impls)+len(base)*btoi(hasBridge)))
			b.WriteString("\n")
			for _, m := range metrics {
				empty := true
				for _, im := range impls {
					empty = empty && m.val(g.runs[im]) == 0
				}
				if empty {
					continue
				}
				fmt.Fprintf(&b, "| %s |", m.name)
				for _, im := range impls {
					fmt.Fprintf(&b, " %s |", m.fmt(g.runs[im]))
				}
				if hasBridge {
					for _, im := range base {
						fmt.Fprintf(&b, " %s |", report.Ratio(m.val(g.runs["xdsbridge"]), m.val(g.runs[im])))
					}
				}
				b.WriteString("\n")
			}
			b.WriteString("| status |")
			for _, im := range impls {
				r := g.runs[im]
				st := "ok"
				if r.Failed {
					st = "**FAILED**: " + strings.ReplaceAll(r.Problem, "|", "/")
				}
				fmt.Fprintf(&b, " %s |", st)
			}
			if hasBridge {
				b.WriteString(strings.Repeat(" |", len(base)))
			}
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// wallTime is the sum of the runs' own wall times.
func wallTime(results []Result) time.Duration {
	var w time.Duration
	for _, r := range results {
		w += r.Wall
	}
	return w
}

// representatives keeps one run per configuration: with repetitions, the
// median run by the scenario's headline figure (convergence p99, else the
// reconnect, else the cold start), failed runs last. The tables and the
// targets then compare like with like; `xdsload summarize` gives each
// figure's own median and range.
func representatives(results []Result) []Result {
	key := func(r Result) Config {
		c := r.Config.measured()
		c.Rep = 0
		return c
	}
	headline := func(r Result) time.Duration {
		switch {
		case r.Failed:
			return math.MaxInt64
		case r.ConvP99 > 0:
			return r.ConvP99
		case r.ReconnectTime > 0:
			return r.ReconnectTime
		}
		return r.ColdStart
	}
	var order []Config
	byKey := map[Config][]Result{}
	for _, r := range results {
		k := key(r)
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		rs := byKey[k]
		slices.SortStableFunc(rs, func(a, b Result) int { return cmp.Compare(headline(a), headline(b)) })
		out = append(out, rs[(len(rs)-1)/2])
	}
	return out
}
