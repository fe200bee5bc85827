package sources

import (
	"log/slog"
	"time"
)

// OutageLogInterval is the least time between two log lines of one
// failing period after its first (see Outage).
const OutageLogInterval = time.Minute

// Outage records the failures of one dependency in a Status and logs
// them as the house rule asks: once when a failing period starts, then at
// most once per OutageLogInterval with the count of failures since the
// previous line, and once when the dependency answers again. However fast
// a loop retries, its log stays bounded.
//
// An Outage belongs to one loop: it is not safe for concurrent use.
type Outage struct {
	// Log and Status are where failures go; Failing and Recovered are
	// the messages of the first and last lines (tests look for them).
	Log       *slog.Logger
	Status    *Status
	Failing   string
	Recovered string

	failing  bool
	since    time.Time
	lastLine time.Time
	unlogged int
	now      func() time.Time
}

// Fail records one failure, logging as described on Outage.
func (o *Outage) Fail(err error) {
	o.Status.Failed(err)
	now := o.clock()
	if !o.failing {
		o.failing, o.since, o.lastLine, o.unlogged = true, now, now, 0
		o.Log.Warn(o.Failing, "err", err)
		return
	}
	o.unlogged++
	if now.Sub(o.lastLine) >= OutageLogInterval {
		o.Log.Warn(o.Failing, "err", err, "failures", o.unlogged, "failing_for", now.Sub(o.since).Round(time.Second))
		o.lastLine, o.unlogged = now, 0
	}
}

// Recover records a good read of the whole registry view: the status is
// no longer stale, and a failing period ends with one line.
func (o *Outage) Recover() {
	o.Status.Succeeded()
	if o.failing {
		o.failing = false
		o.Log.Info(o.Recovered, "failing_for", o.clock().Sub(o.since).Round(time.Millisecond))
	}
}

func (o *Outage) clock() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now()
}
