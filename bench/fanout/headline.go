package fanout

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/xdsbridge/xdsbridge/bench/report"
)

// The headline is the first table of docs/benchmarks.md: a few figures a
// user sizes a deployment by, xdsbridge beside the stock caches, each the
// median of repeated runs of one configuration. It is printed from raw
// results (CSVs, or a suite's log), so that every number in it can be
// traced to a committed file and printed again.

// A Unit is how a figure is shown: its name and how many base units (ns,
// bytes) make one.
type Unit struct {
	Name string
	Per  float64
}

var (
	unitUs = Unit{"µs", 1e3}
	unitMs = Unit{"ms", 1e6}
	unitS  = Unit{"s", 1e9}
	unitB  = Unit{"B", 1}
	unitKB = Unit{"KB", 1e3}
	unitMB = Unit{"MB", 1e6}
)

// num shows v (in base units) in u with three significant digits, and
// thousands separated.
func (u Unit) num(v float64) string {
	x := v / u.Per
	switch {
	case x >= 100:
		return thousands(int64(x + 0.5))
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case x >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// A Figure is what a headline row measures, read from one run in base
// units. Lower is better for every figure.
type Figure struct {
	Name  string
	Unit  Unit
	Value func(Result) float64
}

var (
	figConvP99 = Figure{"a change at every client, p99", unitMs, func(r Result) float64 { return float64(r.ConvP99) }}
	figCPU     = Figure{"server CPU per client·change", unitUs, func(r Result) float64 { return float64(r.CPUPerClientChange) }}
	figBytes   = Figure{"bytes sent per client·change", unitB, func(r Result) float64 { return r.BytesPerClientChange }}
	figCold    = Figure{"cold start, until every client holds all", unitS, func(r Result) float64 { return float64(r.ColdStart) }}
	figRSS     = Figure{"server RSS once quiet", unitMB, func(r Result) float64 { return float64(r.ServerRSS) }}
	figRSSPer  = Figure{"server RSS once quiet, per client", unitKB, func(r Result) float64 {
		if r.Clients == 0 {
			return 0
		}
		return float64(r.ServerRSS) / float64(r.Clients)
	}}
	figPeak = Figure{"server peak RSS, reconnect storm", unitMB, func(r Result) float64 { return float64(r.PeakRSS) }}
)

// A Point is one configuration of a suite, whichever implementation ran it.
type Point struct {
	Scenario          string
	Delta             bool
	Clients, Services int
	Rate              float64 // changes per second; 0 for sequential changes
}

func (p Point) has(r Result) bool {
	return r.Scenario == p.Scenario && r.Delta == p.Delta && r.Clients == p.Clients && r.Services == p.Services && r.Rate == p.Rate
}

func (p Point) String() string {
	s := fmt.Sprintf("%s %s, C=%s, N=%s", p.Scenario, map[bool]string{true: "delta", false: "SotW"}[p.Delta],
		thousands(int64(p.Clients)), thousands(int64(p.Services)))
	if p.Rate > 0 {
		s += ", " + thousands(int64(p.Rate)) + " changes/s"
	}
	return s
}

// A HeadlineRow is one figure at one point. The ratio is xdsbridge's
// median over Ref's, or, with Ref empty, over the better of the stock
// caches'. Chart rows also get a panel in HeadlineChart.
type HeadlineRow struct {
	Figure Figure
	At     Point
	Ref    string
	Chart  bool
}

// HeadlineRows are the rows of docs/benchmarks.md's headline, at the full
// preset's sizes.
var HeadlineRows = []HeadlineRow{
	{figConvP99, Point{"S1", true, 1000, 1000, 0}, "", true},
	{figConvP99, Point{"S1", false, 1000, 1000, 0}, "", true},
	{figConvP99, Point{"S2", true, 200, 10000, 0}, "", false},
	{figConvP99, Point{"S4", true, 1000, 1000, 100}, "", true},
	{figConvP99, Point{"S7", true, 10000, 1000, 0}, "floor", false},
	{figConvP99, Point{"S7", true, 19900, 1000, 0}, "floor", false},
	{figCPU, Point{"S1", true, 1000, 1000, 0}, "", true},
	{figCPU, Point{"S2", true, 200, 10000, 0}, "", false},
	{figCPU, Point{"S7", true, 10000, 1000, 0}, "floor", false},
	{figBytes, Point{"S1", false, 1000, 1000, 0}, "", false},
	{figCold, Point{"S6", true, 1000, 10000, 0}, "", true},
	{figRSSPer, Point{"S1", true, 1000, 1000, 0}, "", true},
	{figRSSPer, Point{"S7", true, 10000, 1000, 0}, "floor", false},
	{figRSS, Point{"S6", true, 1000, 10000, 0}, "", false},
	{figPeak, Point{"S5", true, 1000, 1000, 0}, "", false},
}

// stockImpls are the go-control-plane caches the headline compares with,
// in its column order, and implTitle how it names implementations.
var (
	stockImpls = []string{"snapshot", "linear"}
	implTitle  = map[string]string{"xdsbridge": "xdsbridge", "snapshot": "SnapshotCache", "linear": "LinearCache"}
)

func title(impl string) string {
	if t, ok := implTitle[impl]; ok {
		return t
	}
	return impl
}

// A Source is one file of raw results.
type Source struct {
	Name    string
	Results []Result
}

// cell is one implementation's runs of a row, from the row's source.
type cell struct {
	runs, failed int
	med, lo, hi  float64
}

func (c cell) ok() bool { return c.runs > c.failed && c.med > 0 }

// show is the cell's median, with its range if spread is set, and what
// failed.
func (c cell) show(u Unit, spread bool) string {
	switch {
	case c.runs == 0:
		return "not run"
	case !c.ok() && c.failed > 0:
		return fmt.Sprintf("failed (%d of %d runs)", c.failed, c.runs)
	case !c.ok():
		return "not recorded"
	}
	s := u.num(c.med) + " " + u.Name
	if spread {
		s = c.point(u)
	}
	if c.failed > 0 {
		s += fmt.Sprintf("; %d of %d runs failed", c.failed, c.runs)
	}
	return s
}

// point is the median with its unit, and the range when the runs differ.
func (c cell) point(u Unit) string {
	s := u.num(c.med) + " " + u.Name
	if lo, hi := u.num(c.lo), u.num(c.hi); lo != hi {
		s += " (" + lo + "–" + hi + ")"
	}
	return s
}

// rowData is a row with the source it was taken from and its cells.
type rowData struct {
	HeadlineRow
	source string
	cells  map[string]cell
}

// impls is the implementations a row shows: xdsbridge, the stock caches,
// and Ref.
func (d rowData) impls() []string {
	out := append([]string{"xdsbridge"}, stockImpls...)
	if d.Ref != "" && !slices.Contains(out, d.Ref) {
		out = append(out, d.Ref)
	}
	return out
}

// ref is the implementation the ratio divides by, "" if none ran.
func (d rowData) ref() string {
	if d.Ref != "" {
		return d.Ref
	}
	best := ""
	for _, im := range stockImpls {
		if c := d.cells[im]; c.ok() && (best == "" || c.med < d.cells[best].med) {
			best = im
		}
	}
	return best
}

// collect takes each row from the first source holding a run of
// xdsbridge at its point, and every implementation of the row from that
// source alone: a row never mixes runs of different suites. Rows no
// source has are left out.
func collect(sources []Source, rows []HeadlineRow) []rowData {
	var out []rowData
	for _, row := range rows {
		i := slices.IndexFunc(sources, func(s Source) bool {
			return slices.ContainsFunc(s.Results, func(r Result) bool { return r.Impl == "xdsbridge" && row.At.has(r) })
		})
		if i < 0 {
			continue
		}
		d := rowData{HeadlineRow: row, source: sources[i].Name, cells: map[string]cell{}}
		for _, im := range d.impls() {
			var c cell
			var vs []float64
			for _, r := range sources[i].Results {
				if r.Impl != im || !row.At.has(r) {
					continue
				}
				c.runs++
				if r.Failed {
					c.failed++
				} else if v := row.Figure.Value(r); v > 0 {
					vs = append(vs, v)
				}
			}
			if len(vs) > 0 {
				c.med, c.lo, c.hi = report.MedianRange(vs)
			}
			d.cells[im] = c
		}
		out = append(out, d)
	}
	return out
}

// Headline writes the headline table of rows from sources (see collect),
// then which file each row comes from. Consecutive rows of one figure go
// under a line naming it, which keeps the table narrow enough for one
// line a row; xdsbridge's cells have their range, the stock caches' their
// median (the chart has their ranges); the stock cache the ratio divides
// by is in bold.
func Headline(w io.Writer, sources []Source, rows []HeadlineRow) error {
	data := collect(sources, rows)
	if len(data) == 0 {
		return fmt.Errorf("printing the headline: no source has a run of xdsbridge at any of its %d rows", len(rows))
	}
	var b strings.Builder
	b.WriteString("| configuration | xdsbridge |")
	for _, im := range stockImpls {
		b.WriteString(" " + title(im) + " |")
	}
	b.WriteString(" ratio |\n|---|---:|" + strings.Repeat("---:|", len(stockImpls)) + "---:|\n")
	for i, d := range data {
		if i == 0 || data[i-1].Figure.Name != d.Figure.Name {
			fmt.Fprintf(&b, "| **%s** |%s\n", d.Figure.Name, strings.Repeat(" |", 2+len(stockImpls)))
		}
		fmt.Fprintf(&b, "| %s | %s |", d.At, d.cells["xdsbridge"].show(d.Figure.Unit, true))
		for _, im := range stockImpls {
			s := d.cells[im].show(d.Figure.Unit, false)
			if im == d.ref() {
				s = "**" + s + "**"
			}
			fmt.Fprintf(&b, " %s |", s)
		}
		fmt.Fprintf(&b, " %s |\n", d.ratio())
	}
	b.WriteString("\n")
	names := sourcesOf(data)
	for _, name := range names {
		var of []string
		for _, d := range data {
			if d.source == name {
				of = append(of, d.Figure.Name+" ("+d.At.String()+")")
			}
		}
		if len(names) == 1 {
			fmt.Fprintf(&b, "Raw results of every row: `%s`.\n", name)
		} else {
			fmt.Fprintf(&b, "- `%s`: %s.\n", name, strings.Join(of, "; "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sourcesOf is the sources the rows come from, in their order.
func sourcesOf(data []rowData) []string {
	var names []string
	for _, d := range data {
		if !slices.Contains(names, d.source) {
			names = append(names, d.source)
		}
	}
	return names
}

// ratio is xdsbridge's median over the reference's; a reference without a
// column of its own is named, with its median.
func (d rowData) ratio() string {
	ref := d.ref()
	own, other := d.cells["xdsbridge"], d.cells[ref]
	if ref == "" || !own.ok() || !other.ok() {
		return "–"
	}
	s := report.Ratio(own.med, other.med)
	if !slices.Contains(stockImpls, ref) {
		s += fmt.Sprintf(" the %s's %s %s", title(ref), d.Figure.Unit.num(other.med), d.Figure.Unit.Name)
	}
	return s
}
