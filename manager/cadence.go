package manager

import "time"

// Cadence decides when the manager publishes the changes merged since its
// last publish. Its rule, with Holdoff the manager's holdoff:
//
//   - A change that comes one Holdoff or more after the previous batch's
//     deadline (a quiet period) opens a batch due one Holdoff later, so a
//     burst shorter than Holdoff is still one publish.
//
//   - A change that comes sooner joins the batch due one Holdoff after the
//     previous deadline. Deadlines are anchored to each other, not to the
//     first change of a batch nor to the end of the previous publish: under
//     steady churn batches are due exactly one Holdoff apart, however late
//     in its slot a batch's first change came and however long the
//     previous publish took.
//
//   - A change that comes while a publish is in progress, or within one
//     Holdoff of the end of a publish that overran the next deadline, is due
//     at once: the publish held it past its slot (the manager's loop cannot
//     receive changes while it publishes), and waiting one more Holdoff
//     would make the period the publish's time plus Holdoff when publishes
//     are slower than Holdoff, rather than the publish's time.
//
// So a change waits at most Holdoff beyond any publish in progress,
// deadlines are at least Holdoff apart whatever the rate of changes, and
// under steady churn the cadence does not drift. A publish that starts late
// does not move the next deadline.
//
// Two simpler rules fail under churn: waiting for a quiet period
// (Contour's: Holdoff after the latest change, at most MaxHoldoff after the
// first) waits for a pause that steady churn never makes, and opening the
// window at a batch's first change stretches every period by that
// change's offset and the publish's wall time.
//
// The zero value with Holdoff set is ready to use; it is not safe for
// concurrent use. The benchmark's server-side batching uses it too, so that
// every implementation it compares gets the bridge's timing.
type Cadence struct {
	Holdoff time.Duration
	due     time.Time // deadline of the open batch; zero while none is open
	next    time.Time // one Holdoff after the previous deadline
	busy    bool      // between Published and Finished
	end     time.Time // of the last publish, when it ended at or after next
}

// Add records a change at now and returns when the batch it joins is due.
func (c *Cadence) Add(now time.Time) time.Time {
	if !c.due.IsZero() {
		return c.due
	}
	switch {
	case now.Before(c.next):
		c.due = c.next
	case c.busy || (!c.end.IsZero() && now.Before(c.end.Add(c.Holdoff))):
		c.due = now // held up by a publish that overran its slot
	default:
		c.due = now.Add(c.Holdoff)
	}
	return c.due
}

// Waiting reports whether a batch is open.
func (c *Cadence) Waiting() bool { return !c.due.IsZero() }

// Published closes the open batch as its publish begins at now: the next
// batch is due no sooner than one Holdoff after this one's deadline. A
// publish without an open batch (the first, complete one) anchors the
// cadence at now. Call Finished when the publish returns.
func (c *Cadence) Published(now time.Time) {
	if c.due.IsZero() {
		c.next = now.Add(c.Holdoff)
	} else {
		c.next = c.due.Add(c.Holdoff)
	}
	c.due = time.Time{}
	c.busy = true
	c.end = time.Time{}
}

// Finished records that the publish begun by Published returned at now.
func (c *Cadence) Finished(now time.Time) {
	c.busy = false
	if !now.Before(c.next) {
		c.end = now
	}
}
