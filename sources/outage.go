package sources

import (
	"log/slog"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/pacing"
)

// OutageLogInterval is the least time between two log lines of one
// failing period after its first (see Outage).
const OutageLogInterval = pacing.DefaultLogEvery

// Outage records the failures of one dependency in a Status and logs
// them by the house rule, as a FailureLog does: once when a failing period
// starts, then at most once per OutageLogInterval with the count of
// failures since the previous line, and once when the dependency answers
// again. However fast a loop retries, its log stays bounded. It suits a
// source whose every failure is a failed read of its whole registry view;
// one that tells failures apart from reads (the DNS source's names) keeps
// a FailureLog and its Status apart.
//
// An Outage belongs to one loop; it must not be copied after first use.
type Outage struct {
	// Log and Status are where failures go; Failing and Recovered are
	// the messages of the first and last lines (tests look for them).
	Log       *slog.Logger
	Status    *Status
	Failing   string
	Recovered string

	log pacing.FailureLog
	now func() time.Time
}

// Fail records one failure, logging as described on Outage.
func (o *Outage) Fail(err error) {
	o.Status.Failed(err)
	o.failures().Failed(err)
}

// Recover records a good read of the whole registry view: the status is
// no longer stale, and a failing period ends with one line.
func (o *Outage) Recover() {
	o.Status.Succeeded()
	o.failures().Recovered()
}

func (o *Outage) failures() *pacing.FailureLog {
	if o.log.Log == nil {
		o.log = pacing.FailureLog{Log: o.Log, FailingMsg: o.Failing, RecoveredMsg: o.Recovered, Now: o.now}
	}
	return &o.log
}
