package sources

import "time"

// batch decides when the manager publishes the changes merged since its
// last publish: a fixed window opened by the first change of a batch.
//
// The earlier rule, Contour's (publish Holdoff after the latest change, at
// most MaxHoldoff after the first), waits for a quiet period; under steady
// churn (100 changes/s from a large Consul catalog) that period never comes,
// so every batch waited the full MaxHoldoff and the p99 from a change to its
// publish was MaxHoldoff. With a fixed window a change waits at most Holdoff
// (p99 ≈ Holdoff + fan-out at any rate), the manager publishes at most once
// per Holdoff however fast changes arrive, and a burst shorter than Holdoff
// still goes out as one publish. Longer bursts are published in slices of
// Holdoff, which the engine handles as ordinary incremental changes.
type batch struct {
	window time.Duration
	due    time.Time // zero while no change waits
}

// add records a change at now and returns when the batch it joins is due.
func (b *batch) add(now time.Time) time.Time {
	if b.due.IsZero() {
		b.due = now.Add(b.window)
	}
	return b.due
}

// waiting reports whether a change waits for the batch's deadline.
func (b *batch) waiting() bool { return !b.due.IsZero() }

// done closes the batch at its publish.
func (b *batch) done() { b.due = time.Time{} }
