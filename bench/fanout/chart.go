package fanout

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/report"
)

// A hand-written SVG: small panels (grouped bars for S1, lines over N and C
// for S2 and S3), log-scaled y axes since the implementations differ by
// orders of magnitude.

const (
	panelW, panelH = 460, 300
	padL, padR     = 70, 20
	padT, padB     = 40, 55
)

var implColor = map[string]string{"xdsbridge": "#1f77b4", "snapshot": "#d62728", "linear": "#2ca02c"}

func color(impl string) string {
	if c, ok := implColor[impl]; ok {
		return c
	}
	return "#7f7f7f"
}

type point struct{ x, y float64 }

type series struct {
	name string
	pts  []point
}

type panel struct {
	title  string
	ylabel func(float64) string
	xlabel string
	cats   []string // bar panel: categories; else a line panel over x
	series []series // bar panel: one value per category in pts[i].y
}

// Chart draws the panels that the results have data for.
func Chart(results []Result) string {
	var ps []panel
	durMs := func(v float64) string { return report.MS(time.Duration(v)) }
	durUs := func(v float64) string { return report.US(time.Duration(v)) }
	type m struct {
		name string
		val  func(Result) float64
		fmt  func(float64) string
	}
	ms3 := []m{
		{"convergence p99", func(r Result) float64 { return float64(r.ConvP99) }, durMs},
		{"server CPU / client·change", func(r Result) float64 { return float64(r.CPUPerClientChange) }, durUs},
		{"bytes / client·change", func(r Result) float64 { return r.BytesPerClientChange }, report.Size},
	}
	// S1: bars per mode.
	if s1 := filter(results, func(r Result) bool { return r.Scenario == "S1" }); len(s1) > 0 {
		modes := uniq(s1, func(r Result) string { return r.Mode() })
		for _, mt := range ms3 {
			p := panel{title: "S1 " + mt.name, ylabel: mt.fmt, cats: modes}
			for _, im := range uniq(s1, func(r Result) string { return r.Impl }) {
				s := series{name: im}
				for _, mo := range modes {
					s.pts = append(s.pts, point{y: valueOf(s1, im, func(r Result) bool { return r.Mode() == mo }, mt.val)})
				}
				p.series = append(p.series, s)
			}
			ps = append(ps, p)
		}
	}
	sweep := func(sc, xname string, x func(Result) float64, metrics []m) {
		rs := filter(results, func(r Result) bool { return r.Scenario == sc && r.Delta })
		if len(uniq(rs, func(r Result) string { return fmt.Sprint(x(r)) })) < 2 {
			return
		}
		for _, mt := range metrics {
			p := panel{title: fmt.Sprintf("%s (delta): %s vs %s", sc, mt.name, xname), ylabel: mt.fmt, xlabel: xname}
			for _, im := range uniq(rs, func(r Result) string { return r.Impl }) {
				s := series{name: im}
				for _, r := range rs {
					if r.Impl == im && !r.Failed && mt.val(r) > 0 {
						s.pts = append(s.pts, point{x(r), mt.val(r)})
					}
				}
				slices.SortFunc(s.pts, func(a, b point) int { return int(math.Copysign(1, a.x-b.x)) })
				p.series = append(p.series, s)
			}
			ps = append(ps, p)
		}
	}
	cpuChange := m{"server CPU / change", func(r Result) float64 { return float64(r.CPUPerChange) }, durMs}
	sweep("S2", "N (services)", func(r Result) float64 { return float64(r.Services) }, []m{ms3[0], cpuChange, ms3[2]})
	sweep("S3", "C (clients)", func(r Result) float64 { return float64(r.Clients) }, ms3[:2])

	cols := 2
	rows := (len(ps) + cols - 1) / cols
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n",
		cols*panelW, max(rows, 1)*panelH+30)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	// Legend.
	x := 10
	for _, im := range []string{"xdsbridge", "snapshot", "linear"} {
		fmt.Fprintf(&b, `<rect x="%d" y="10" width="12" height="12" fill="%s"/><text x="%d" y="20">%s</text>`+"\n", x, color(im), x+16, im)
		x += 110
	}
	b.WriteString(`<text x="350" y="20" fill="#555">log scale; lower is better</text>` + "\n")
	for i, p := range ps {
		fmt.Fprintf(&b, `<g transform="translate(%d,%d)">`+"\n", (i%cols)*panelW, 30+(i/cols)*panelH)
		p.draw(&b)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func filter(rs []Result, keep func(Result) bool) []Result {
	var out []Result
	for _, r := range rs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func uniq(rs []Result, key func(Result) string) []string {
	var out []string
	for _, r := range rs {
		if k := key(r); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func valueOf(rs []Result, impl string, match func(Result) bool, val func(Result) float64) float64 {
	for _, r := range rs {
		if r.Impl == impl && match(r) && !r.Failed {
			return val(r)
		}
	}
	return 0
}

// logRange returns the decade range covering the positive values.
func logRange(ps []series) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ps {
		for _, p := range s.pts {
			if p.y > 0 {
				lo, hi = min(lo, p.y), max(hi, p.y)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 0, false
	}
	return math.Floor(math.Log10(lo)), math.Max(math.Ceil(math.Log10(hi)), math.Floor(math.Log10(lo))+1), true
}

func (p panel) draw(b *strings.Builder) {
	w, h := float64(panelW-padL-padR), float64(panelH-padT-padB)
	fmt.Fprintf(b, `<text x="%d" y="20" font-size="13" font-weight="bold">%s</text>`+"\n", padL, html.EscapeString(p.title))
	lo, hi, ok := logRange(p.series)
	if !ok {
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#999">no data</text>`+"\n", padL+10, padT+20)
		return
	}
	ypos := func(v float64) float64 { return float64(padT) + h - (math.Log10(v)-lo)/(hi-lo)*h }
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#ccc"/>`+"\n", padL, padT, w, h)
	for e := lo; e <= hi; e++ {
		v := math.Pow(10, e)
		y := ypos(v)
		fmt.Fprintf(b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			padL, float64(padL)+w, y, y, padL-4, y+4, html.EscapeString(p.ylabel(v)))
	}
	if p.cats != nil {
		p.bars(b, w, h, ypos)
		return
	}
	p.lines(b, w, ypos)
}

func (p panel) bars(b *strings.Builder, w, h float64, ypos func(float64) float64) {
	gw := w / float64(len(p.cats))
	bw := gw * 0.8 / float64(max(len(p.series), 1))
	for ci, cat := range p.cats {
		gx := float64(padL) + gw*float64(ci) + gw*0.1
		for si, s := range p.series {
			v := s.pts[ci].y
			if v <= 0 {
				continue
			}
			x, y := gx+bw*float64(si), ypos(v)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				x, y, bw-2, float64(padT)+h-y, color(s.name), s.name, cat, html.EscapeString(p.ylabel(v)))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9">%s</text>`+"\n", x+bw/2-1, y-3, html.EscapeString(p.ylabel(v)))
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", gx+gw*0.4, float64(padT)+h+16, cat)
	}
}

func (p panel) lines(b *strings.Builder, w float64, ypos func(float64) float64) {
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, s := range p.series {
		for _, pt := range s.pts {
			xlo, xhi = min(xlo, pt.x), max(xhi, pt.x)
		}
	}
	if xhi <= xlo {
		xhi = xlo * 10
	}
	// x is log-scaled too: sweeps go 100 -> 10,000.
	xpos := func(v float64) float64 {
		return float64(padL) + 10 + (math.Log10(v)-math.Log10(xlo))/(math.Log10(xhi)-math.Log10(xlo))*(w-20)
	}
	var ticks []float64
	for _, s := range p.series {
		for _, pt := range s.pts {
			if !slices.Contains(ticks, pt.x) {
				ticks = append(ticks, pt.x)
			}
		}
	}
	base := float64(panelH - padB)
	for _, t := range ticks {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%g</text>`+"\n", xpos(t), base+16, t)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", float64(padL)+w/2, base+34, html.EscapeString(p.xlabel))
	for _, s := range p.series {
		var pts []string
		for _, pt := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xpos(pt.x), ypos(pt.y)))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s %g: %s</title></circle>`+"\n",
				xpos(pt.x), ypos(pt.y), color(s.name), s.name, pt.x, html.EscapeString(p.ylabel(pt.y)))
		}
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color(s.name))
		}
	}
}
