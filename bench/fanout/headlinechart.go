package fanout

import (
	"fmt"
	"html"
	"strings"

	"github.com/xdsbridge/xdsbridge/bench/report"
)

// The headline chart: one small panel per chart row of the headline,
// a horizontal bar per implementation at its median, a whisker over its
// range, the median written at the end. The scales are linear from zero,
// so that a bar a tenth as long is a tenth of the cost.

const (
	hcCols          = 3
	hcPanelW        = 340
	hcPanelH        = 160
	hcTop, hcBottom = 52, 30
	hcLabelW        = 104 // implementation names, right-aligned
	hcValueW        = 80  // room for the median after the longest bar
	hcBarH, hcGap   = 22, 8
	hcBarsTop       = 44 // below the panel's two title lines
)

// HeadlineChart draws the chart rows of the headline (see Headline for
// which source each row comes from) as an SVG document.
func HeadlineChart(sources []Source, rows []HeadlineRow) string {
	var charted []rowData
	for _, d := range collect(sources, rows) {
		if d.Chart {
			charted = append(charted, d)
		}
	}
	nrows := max((len(charted)+hcCols-1)/hcCols, 1)
	width, height := hcCols*hcPanelW+20, hcTop+nrows*hcPanelH+hcBottom
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	b.WriteString(`<text x="10" y="20" font-size="15" font-weight="bold">xdsbridge and go-control-plane's stock caches, same rig, same workload</text>` + "\n")
	b.WriteString(`<text x="10" y="38" fill="#555">each bar the median of a configuration's runs, the whisker their range; scales linear from zero; lower is better</text>` + "\n")
	for i, d := range charted {
		fmt.Fprintf(&b, `<g transform="translate(%d,%d)">`+"\n", 10+(i%hcCols)*hcPanelW, hcTop+(i/hcCols)*hcPanelH)
		d.panel(&b)
		b.WriteString("</g>\n")
	}
	fmt.Fprintf(&b, `<text x="10" y="%d" fill="#555">raw results: %s; drawn by xdsload headline</text>`+"\n", height-10, html.EscapeString(strings.Join(sourcesOf(charted), ", ")))
	b.WriteString("</svg>\n")
	return b.String()
}

// panel draws one row's bars in a panel whose origin is its top left.
func (d rowData) panel(b *strings.Builder) {
	fmt.Fprintf(b, `<text x="0" y="14" font-size="13" font-weight="bold">%s</text>`+"\n", html.EscapeString(d.Figure.Name))
	fmt.Fprintf(b, `<text x="0" y="29" fill="#555">%s</text>`+"\n", html.EscapeString(d.At.String()))
	top := 0.0
	for _, c := range d.cells {
		if c.ok() {
			top = max(top, c.hi)
		}
	}
	x0, w := float64(hcLabelW), float64(hcPanelW-hcLabelW-hcValueW-10)
	xpos := func(v float64) float64 { return x0 + w*v/top }
	u := d.Figure.Unit
	for i, im := range d.impls() {
		y := float64(hcBarsTop + i*(hcBarH+hcGap))
		mid := y + hcBarH/2
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", hcLabelW-6, mid+4, title(im))
		c := d.cells[im]
		if !c.ok() {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#999" font-style="italic">%s</text>`+"\n", x0+2, mid+4, html.EscapeString(c.show(u, false)))
			continue
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`+"\n",
			x0, y, max(xpos(c.med)-x0, 1.5), hcBarH, color(im), title(im), html.EscapeString(c.point(u)))
		if c.lo != c.hi {
			lo, hi := xpos(c.lo), xpos(c.hi)
			fmt.Fprintf(b, `<path d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f" stroke="#333" fill="none"/>`+"\n",
				lo, mid, hi, lo, mid-5, mid+5, hi, mid-5, mid+5)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s %s</text>`+"\n", max(xpos(c.hi), xpos(c.med))+5, mid+4, u.num(c.med), u.Name)
	}
	if ref := d.ref(); ref != "" && d.cells["xdsbridge"].ok() && d.cells[ref].ok() {
		y := hcBarsTop + len(d.impls())*(hcBarH+hcGap) + 6
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555">xdsbridge: %s %s's</text>`+"\n", hcLabelW, y, report.Ratio(d.cells["xdsbridge"].med, d.cells[ref].med), title(ref))
	}
}
