package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/countproxy"
)

// paced returns the most attempts a loop paced by the bridge's backoff
// (exponential from lo, doubling to hi, each wait at least half its
// nominal length) can make within d of its first failed attempt: that
// attempt, and each one after a wait whose shortest length still fits.
func paced(lo, hi, d time.Duration) int64 {
	n, wait, spent := int64(1), lo, lo/2
	for spent <= d {
		n++
		wait = min(2*wait, hi)
		spent += wait / 2
	}
	return n
}

// every returns the most attempts a loop that waits at least gap between
// them can make within d.
func every(gap, d time.Duration) int64 { return 1 + int64(d/gap) }

// window is the span of one fault: from just before the fault was made
// to when the test reads what happened during it.
type window struct {
	t      *testing.T
	b      *bridge
	start  time.Time
	mark   int
	proxy  *countproxy.Proxy
	before countproxy.Counts
}

// openWindow marks the start of a fault that test t makes; proxy (may be
// nil) counts the work the bridge sends at the dependency.
func (b *bridge) openWindow(t *testing.T, proxy *countproxy.Proxy) *window {
	t.Helper()
	w := &window{t: t, b: b, start: time.Now(), mark: b.logMark(), proxy: proxy}
	if proxy != nil {
		w.before = proxy.Counts()
	}
	return w
}

// work returns the counts since the window opened and how long it has
// been open, read in that order: the elapsed time can only be longer than
// the span the counts cover, so a bound computed from it only loosens.
func (w *window) work() (countproxy.Counts, time.Duration) {
	c := w.proxy.Counts().Sub(w.before)
	return c, time.Since(w.start)
}

// checkWork fails the test if the bridge sent more than allowed(elapsed)
// attempts at the dependency since the window opened.
func (w *window) checkWork(what string, allowed func(time.Duration) int64) {
	w.t.Helper()
	c, d := w.work()
	limit := allowed(d)
	w.t.Logf("%s: %d attempts (%d connections, %d refused) in %s; at most %d allowed",
		what, c.Attempts(), c.Conns, c.Refused, d.Round(time.Millisecond), limit)
	if c.Attempts() > limit {
		w.t.Errorf("%s: the bridge made %d attempts at the failing dependency in %s, more than the %d its backoff allows",
			what, c.Attempts(), d.Round(time.Millisecond), limit)
	}
}

// checkLogs fails the test if the bridge logged more than limit warnings
// and errors about source since the window opened.
func (w *window) checkLogs(source string, limit int) {
	w.t.Helper()
	lines := w.b.problems(w.mark, source)
	if len(lines) > limit {
		w.t.Errorf("%d warnings and errors about %s during the fault, want at most %d:\n%s",
			len(lines), source, limit, strings.Join(lines, "\n"))
	}
}
