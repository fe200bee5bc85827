package report

import (
	"fmt"
	"slices"
	"time"
)

// MS formats d in milliseconds (seconds from 10 s on), "–" for zero.
func MS(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.3f ms", float64(d)/1e6)
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// US formats d in microseconds, "–" for zero.
func US(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f µs", float64(d)/1e3)
}

// Size formats b bytes in B, KB or MB.
func Size(b float64) string {
	switch {
	case b <= 0:
		return fmt.Sprintf("%.0f B", b)
	case b < 10_000:
		return fmt.Sprintf("%.0f B", b)
	case b < 10_000_000:
		return fmt.Sprintf("%.1f KB", b/1e3)
	}
	return fmt.Sprintf("%.1f MB", b/1e6)
}

// Ratio formats a/b as a factor, "–" when either is not positive.
func Ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	r := a / b
	if r < 0.1 {
		return fmt.Sprintf("%.3f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// Pct is the p-th percentile (nearest rank) of ds; 0 for none.
func Pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Spread shows the median of vs, with the min–max range when they differ.
func Spread(vs []float64, show func(float64) string) string {
	if len(vs) == 0 {
		return "–"
	}
	med, lo, hi := MedianRange(vs)
	if lo == hi {
		return show(med)
	}
	return fmt.Sprintf("%s (%s–%s)", show(med), show(lo), show(hi))
}

// CPU shows a CPU time read from /proc, where 0 is a real reading: less
// than the clock tick of 10 ms.
func CPU(d time.Duration) string {
	if d == 0 {
		return "<10 ms"
	}
	return MS(d)
}

// MedianRange is the median of vs (the mean of the middle two for an even
// count) and its range.
func MedianRange(vs []float64) (med, lo, hi float64) {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	med = vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return med, vs[0], vs[len(vs)-1]
}
