package consul

import (
	"testing"
	"time"
)

// TestPacer: sweep reads are charged costFactor times the shortest recent
// round trip of their kind, so a read that waited for a busy host costs what the agent
// spent, and the next read may start once the charges fit in sweepShare
// of the time since.
func TestPacer(t *testing.T) {
	var p pacer
	t0 := time.Unix(1000, 0)
	if at := p.readyAt(t0); !at.Equal(t0) {
		t.Fatalf("a fresh pacer is ready at %v, want now", at)
	}
	const fast, slow = 100 * time.Microsecond, 5 * time.Millisecond
	p.spend(true, fast, t0)
	p.spend(true, slow, t0) // waited for a CPU: charged as the fast one
	if got, want := p.readyAt(t0).Sub(t0), scaled(2*costFactor*fast); got != want {
		t.Errorf("ready after %v, want %v (two reads charged %v each)", got, want, fast)
	}
	// Full reads are charged apart from peeks.
	var q pacer
	q.spend(true, fast, t0)
	q.spend(false, slow, t0)
	if got, want := q.readyAt(t0).Sub(t0), scaled(costFactor*(fast+slow)); got != want {
		t.Errorf("a peek and a full read: ready after %v, want %v", got, want)
	}
	// A quiet pacer builds up at most pacerCredit.
	later := t0.Add(time.Hour)
	if at := q.readyAt(later); !at.Equal(later) {
		t.Fatalf("ready at %v after an hour, want now", at)
	}
	q.spend(true, fast, later)
	if want := costFactor*fast - pacerCredit; q.debt != want {
		t.Errorf("debt %v after an hour's quiet and a read, want %v", q.debt, want)
	}
}

// scaled is how long cost takes to pay off at sweepShare.
func scaled(cost time.Duration) time.Duration { return time.Duration(float64(cost) / sweepShare) }
