package sources

import (
	"testing"
	"time"
)

// TestBatchCadence drives the batching rule with a synthetic clock: under
// steady churn at several rates every change is published at most one
// window after it arrived, and publishes are at least one window apart.
func TestBatchCadence(t *testing.T) {
	const window = 100 * time.Millisecond
	for _, rate := range []int{10, 100, 300, 1000, 10000} {
		b := batch{window: window}
		start := time.Unix(1000, 0)
		every := time.Second / time.Duration(rate)
		var (
			publishes []time.Time
			waiting   []time.Time // changes of the open batch
			worst     time.Duration
		)
		flush := func(at time.Time) {
			for _, c := range waiting {
				worst = max(worst, at.Sub(c))
			}
			waiting = waiting[:0]
			publishes = append(publishes, at)
			b.done()
		}
		for i := range 3 * rate { // three seconds of changes
			now := start.Add(time.Duration(i) * every)
			if b.waiting() && !now.Before(b.due) {
				flush(b.due) // the timer fired before this change
			}
			b.add(now)
			waiting = append(waiting, now)
		}
		flush(b.due)
		if worst > window {
			t.Errorf("%d/s: a change waited %v, more than the window %v", rate, worst, window)
		}
		for i := 1; i < len(publishes); i++ {
			if gap := publishes[i].Sub(publishes[i-1]); gap < window {
				t.Errorf("%d/s: publishes %v apart, less than the window", rate, gap)
				break
			}
		}
		if max := 3*time.Second/window + 1; len(publishes) > int(max) {
			t.Errorf("%d/s: %d publishes in 3s, want at most %d", rate, len(publishes), max)
		}
	}
}

// TestBatchBurstIsOnePublish checks that changes closer together than the
// window join the batch of the first without moving its deadline.
func TestBatchBurstIsOnePublish(t *testing.T) {
	b := batch{window: time.Second}
	t0 := time.Unix(0, 0)
	due := b.add(t0)
	for i := range 10 {
		if d := b.add(t0.Add(time.Duration(i) * 50 * time.Millisecond)); !d.Equal(due) {
			t.Fatalf("change %d moved the deadline to %v, want %v", i, d, due)
		}
	}
	b.done()
	if b.waiting() {
		t.Fatal("batch still waiting after its publish")
	}
	if d := b.add(t0.Add(2 * time.Second)); !d.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("next batch due %v, want one window after its first change", d)
	}
}
