package manager

import (
	"testing"
	"time"
)

// cadenceSim drives a Cadence with a synthetic clock the way the manager's
// loop does: changes are received in order, the timer fires at the
// deadline, and a publish takes flushTime of wall time during which the
// changes that arrive wait to be received.
type cadenceSim struct {
	c         Cadence
	flushTime time.Duration
	busyUntil time.Time   // end of the publish in progress
	due       time.Time   // of the open batch, as Add returned it
	waiting   []time.Time // arrival times of the open batch's changes
	publishes []time.Time // when each publish began
	worst     time.Duration
}

// change delivers a change that arrived at t.
func (s *cadenceSim) change(t time.Time) {
	s.until(t)
	recv := t
	if recv.Before(s.busyUntil) {
		recv = s.busyUntil // the loop was publishing
	}
	s.due = s.c.Add(recv)
	s.waiting = append(s.waiting, t)
}

// until fires the deadline if it falls before t.
func (s *cadenceSim) until(t time.Time) {
	if !s.c.Waiting() {
		return
	}
	if s.due.After(t) {
		return
	}
	at := s.due
	if at.Before(s.busyUntil) {
		at = s.busyUntil
	}
	for _, w := range s.waiting {
		s.worst = max(s.worst, at.Sub(w))
	}
	s.waiting = s.waiting[:0]
	s.publishes = append(s.publishes, at)
	s.c.Published(at)
	s.busyUntil = at.Add(s.flushTime)
	s.c.Finished(s.busyUntil) // the loop receives nothing before
}

// TestCadenceSteadyChurn checks the clock-anchored cadence: under steady
// churn at several rates, with publishes that take a fifth of the holdoff
// of wall time, batches are published exactly one holdoff apart (a
// deadline counted from a batch's first change, or from the end of the
// previous publish, would drift) and no change waits longer than the
// holdoff.
func TestCadenceSteadyChurn(t *testing.T) {
	const holdoff = 100 * time.Millisecond
	for _, rate := range []int{11, 30, 100, 300, 1000, 10000} {
		s := cadenceSim{c: Cadence{Holdoff: holdoff}, flushTime: holdoff / 5}
		start := time.Unix(1000, 0).Add(3 * time.Millisecond)
		every := time.Second / time.Duration(rate)
		end := start.Add(3 * time.Second)
		for now := start; now.Before(end); now = now.Add(every) {
			s.change(now)
		}
		s.until(end.Add(time.Hour))
		if s.worst > holdoff {
			t.Errorf("%d/s: a change waited %v, more than the holdoff %v", rate, s.worst, holdoff)
		}
		for i := 1; i < len(s.publishes); i++ {
			if gap := s.publishes[i].Sub(s.publishes[i-1]); gap != holdoff {
				t.Errorf("%d/s: publishes %d and %d are %v apart, want exactly the holdoff %v", rate, i-1, i, gap, holdoff)
				break
			}
		}
		if n, want := len(s.publishes), 30; n < want-1 || n > want+1 {
			t.Errorf("%d/s: %d publishes in 3s, want %d±1", rate, n, want)
		}
	}
}

// TestCadenceSlowPublishes checks the overload case: when a publish takes
// longer than the holdoff, the changes it held up are published as soon as
// it returns, so publishes follow each other at the publish's own pace, not
// at that pace plus a holdoff.
func TestCadenceSlowPublishes(t *testing.T) {
	const holdoff = 100 * time.Millisecond
	s := cadenceSim{c: Cadence{Holdoff: holdoff}, flushTime: 3 * holdoff / 2}
	start := time.Unix(1000, 0)
	for now := start; now.Before(start.Add(3 * time.Second)); now = now.Add(time.Millisecond) {
		s.change(now)
	}
	for i := 2; i < len(s.publishes)-1; i++ {
		if gap := s.publishes[i].Sub(s.publishes[i-1]); gap != s.flushTime {
			t.Fatalf("publishes %d and %d are %v apart, want the publish time %v", i-1, i, gap, s.flushTime)
		}
	}
	if s.worst > holdoff+s.flushTime {
		t.Errorf("a change waited %v, more than a holdoff plus a publish", s.worst)
	}
}

// TestCadenceRules checks the rule change by change.
func TestCadenceRules(t *testing.T) {
	const h = 100 * time.Millisecond
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		ms      int  // when the step happens
		publish bool // the open batch is published at ms (and returns then); else a change arrives
		due     int  // ms: the deadline Add returns for the change
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"after a quiet period a change waits one holdoff", []step{
			{ms: 0, due: 100},
		}},
		{"a burst shorter than the holdoff is one batch", []step{
			{ms: 0, due: 100}, {ms: 30, due: 100}, {ms: 99, due: 100},
		}},
		{"a change in the next slot is due one holdoff after the previous deadline", []step{
			{ms: 0, due: 100}, {publish: true, ms: 100},
			{ms: 107, due: 200}, {ms: 150, due: 200},
		}},
		{"a slow publish does not move the next deadline", []step{
			{ms: 0, due: 100}, {publish: true, ms: 180},
			{ms: 181, due: 200},
		}},
		{"a change right after a publish that overran the next slot is due at once", []step{
			{ms: 0, due: 100}, {publish: true, ms: 250},
			{ms: 251, due: 251},
		}},
		{"a change a holdoff after a publish that overran is a quiet-period change", []step{
			{ms: 0, due: 100}, {publish: true, ms: 250},
			{ms: 350, due: 450},
		}},
		{"a change at the next deadline opens a new holdoff", []step{
			{ms: 0, due: 100}, {publish: true, ms: 100},
			{ms: 200, due: 300},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Cadence{Holdoff: h}
			for i, st := range tt.steps {
				if st.publish {
					c.Published(at(st.ms))
					c.Finished(at(st.ms))
					if c.Waiting() {
						t.Fatalf("step %d: batch still open after its publish", i)
					}
					continue
				}
				if got := c.Add(at(st.ms)); !got.Equal(at(st.due)) {
					t.Fatalf("step %d: change at %dms due at %v, want %dms", i, st.ms, got.Sub(t0), st.due)
				}
				if !c.Waiting() {
					t.Fatalf("step %d: no batch open after a change", i)
				}
			}
		})
	}
}

// TestCadenceFirstPublishAnchors checks that a publish without an open
// batch (the manager's first, complete one) starts the cadence: a change
// right after it waits for one holdoff after it, not longer.
func TestCadenceFirstPublishAnchors(t *testing.T) {
	c := Cadence{Holdoff: time.Second}
	t0 := time.Unix(0, 0)
	c.Published(t0)
	if got := c.Add(t0.Add(300 * time.Millisecond)); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("change after the first publish due at %v, want one holdoff after it", got.Sub(t0))
	}
}
