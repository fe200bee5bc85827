package fanout

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/report"
)

// summaryColumns are the figures Summarize reports, with their CSV column
// and how to show one value. Per-client cold-start CPU is derived.
var summaryColumns = []struct {
	title, col string
	show       func(float64) string
}{
	{"cold start", "cold_start_ns", nsShow},
	{"cold CPU / client", "cold_cpu_per_client_ns", nsShow},
	{"conv p50", "conv_p50_ns", nsShow},
	{"conv p99", "conv_p99_ns", nsShow},
	{"CPU / client·change", "cpu_per_client_change_ns", nsShow},
	{"bytes / client·change", "bytes_per_client_change", report.Size},
	{"heap / client", "heap_per_client", report.Size},
	{"RSS / client", "rss_per_client", report.Size},
	{"process RSS", "server_rss", report.Size}, // once quiet after the changes: what a container limit sees
	{"RSS right after", "server_rss_busy", report.Size},
	{"peak RSS", "server_peak_rss", report.Size},
	{"reconnect", "reconnect_ns", nsShow},
	{"fleet CPU / change", "loadgen_cpu_per_change_ns", nsShow},
	{"fleet peak RSS", "loadgen_peak_rss", report.Size},
	{"run wall time", "wall_ns", nsShow},
	{"achieved rate", "achieved_rate", func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + "/s" }},
	{"conv p99 first ¼", "conv_p99_first_ns", nsShow},
	{"conv p99 last ¼", "conv_p99_last_ns", nsShow},
	{"publishes", "flushes", func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }},
}

func nsShow(v float64) string { return report.MS(time.Duration(v)) }

// Summarize reads result CSVs (as written by CSV, any number of runs per
// configuration) and writes one Markdown table per scenario point: per
// implementation each figure as median (min–max) over its runs, and the
// number of runs. Failed runs are counted but not summarised. Columns that
// are zero for every run are left out.
func Summarize(w io.Writer, inputs ...io.Reader) error {
	type point struct {
		key   string
		impls []string
		rows  map[string][]map[string]string
	}
	var points []*point
	for _, in := range inputs {
		rows, err := csv.NewReader(in).ReadAll()
		if err != nil {
			return fmt.Errorf("reading results: %w", err)
		}
		if len(rows) == 0 {
			continue
		}
		head := rows[0]
		for _, rec := range rows[1:] {
			m := map[string]string{}
			for i, h := range head {
				if i < len(rec) {
					m[h] = rec[i]
				}
			}
			if c, _ := strconv.ParseFloat(m["clients"], 64); c > 0 {
				cpu, _ := strconv.ParseFloat(m["cold_cpu_ns"], 64)
				m["cold_cpu_per_client_ns"] = strconv.FormatFloat(cpu/c, 'f', 0, 64)
			}
			key := fmt.Sprintf("%s %s C=%s N=%s", m["scenario"], m["mode"], m["clients"], m["services"])
			if r := m["rate"]; r != "" && r != "0.0" {
				key += " " + r + "/s"
			}
			if h, _ := strconv.ParseInt(m["holdoff_ns"], 10, 64); h > 0 {
				key += " holdoff " + time.Duration(h).String()
			}
			i := slices.IndexFunc(points, func(p *point) bool { return p.key == key })
			if i < 0 {
				points = append(points, &point{key: key, rows: map[string][]map[string]string{}})
				i = len(points) - 1
			}
			p := points[i]
			if _, ok := p.rows[m["impl"]]; !ok {
				p.impls = append(p.impls, m["impl"])
			}
			p.rows[m["impl"]] = append(p.rows[m["impl"]], m)
		}
	}
	for _, p := range points {
		var cols []int
		for ci, c := range summaryColumns {
			for _, rs := range p.rows {
				if slices.ContainsFunc(rs, func(m map[string]string) bool { v, _ := strconv.ParseFloat(m[c.col], 64); return v != 0 }) {
					cols = append(cols, ci)
					break
				}
			}
		}
		fmt.Fprintf(w, "\n#### %s\n\n| impl | runs |", p.key)
		for _, ci := range cols {
			fmt.Fprintf(w, " %s |", summaryColumns[ci].title)
		}
		fmt.Fprintf(w, "\n|---|---:|%s\n", strings.Repeat("---:|", len(cols)))
		for _, im := range p.impls {
			var ok []map[string]string
			for _, m := range p.rows[im] {
				if m["failed"] != "true" {
					ok = append(ok, m)
				}
			}
			runs := strconv.Itoa(len(ok))
			if n := len(p.rows[im]) - len(ok); n > 0 {
				runs += fmt.Sprintf(" (+%d failed)", n)
			}
			fmt.Fprintf(w, "| %s | %s |", im, runs)
			for _, ci := range cols {
				c := summaryColumns[ci]
				var vs []float64
				for _, m := range ok {
					v, _ := strconv.ParseFloat(m[c.col], 64)
					vs = append(vs, v)
				}
				fmt.Fprintf(w, " %s |", report.Spread(vs, c.show))
			}
			fmt.Fprintln(w)
		}
		if lines := floorRatios(p.rows["xdsbridge"], p.rows["floor"]); len(lines) > 0 {
			fmt.Fprintf(w, "\n%s\n", strings.Join(lines, "\n\n"))
		}
	}
	return nil
}

// floorRatios state xdsbridge's fan-out of a change against the floor's:
// server CPU per client·change, and convergence p99 (the time until every
// client holds the change).
func floorRatios(bridge, floor []map[string]string) []string {
	var out []string
	for _, f := range []struct {
		what, col string
		show      func(float64) string
	}{
		{"server CPU per client·change", "cpu_per_client_change_ns", nsShowUs},
		{"convergence p99", "conv_p99_ns", nsShow},
	} {
		if line := floorRatio(bridge, floor, f.what, f.col, f.show); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// floorRatio states xdsbridge's figure col over the floor's, from the
// medians of their runs that did not fail, and per round (runs of the same
// repetition, which ran next to each other) when each round has one run of
// each; "" unless both have such figures. Runs of separate invocations
// share repetition numbers, so they are not paired.
func floorRatio(bridge, floor []map[string]string, what, col string, show func(float64) string) string {
	type runs struct {
		vs    []float64
		byRep map[string]float64
	}
	collect := func(rows []map[string]string) runs {
		r := runs{byRep: map[string]float64{}}
		for _, m := range rows {
			if v, _ := strconv.ParseFloat(m[col], 64); v > 0 && m["failed"] != "true" {
				r.vs = append(r.vs, v)
				r.byRep[m["rep"]] = v
			}
		}
		return r
	}
	b, f := collect(bridge), collect(floor)
	if len(b.vs) == 0 || len(f.vs) == 0 {
		return ""
	}
	bm, _, _ := report.MedianRange(b.vs)
	fm, _, _ := report.MedianRange(f.vs)
	line := fmt.Sprintf("xdsbridge / floor, %s: %.2f× (medians %s / %s)", what, bm/fm, show(bm), show(fm))
	var rounds []string
	if len(b.byRep) == len(b.vs) && len(f.byRep) == len(f.vs) {
		for _, rep := range slices.Sorted(maps.Keys(b.byRep)) {
			if fv, ok := f.byRep[rep]; ok {
				rounds = append(rounds, fmt.Sprintf("%.2f×", b.byRep[rep]/fv))
			}
		}
	}
	if len(rounds) > 1 {
		line += "; by round " + strings.Join(rounds, ", ")
	}
	return line + "."
}

func nsShowUs(v float64) string { return report.US(time.Duration(v)) }
