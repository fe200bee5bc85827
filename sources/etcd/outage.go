package etcd

import (
	"log/slog"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// outageLogInterval is the least time between two log lines of one
// failing period after its first.
const outageLogInterval = time.Minute

// outage records the failures of etcd in the source's Status and logs
// them once when a failing period starts, then at most once per
// outageLogInterval with the count of failures since the previous line,
// and once when etcd answers again.
type outage struct {
	log    *slog.Logger
	status *sources.Status

	failing  bool
	since    time.Time
	lastLine time.Time
	unlogged int
}

func (o *outage) fail(err error) {
	o.status.Failed(err)
	now := time.Now()
	if !o.failing {
		o.failing, o.since, o.lastLine, o.unlogged = true, now, now, 0
		o.log.Warn(msgFailing, "err", err)
		return
	}
	o.unlogged++
	if now.Sub(o.lastLine) >= outageLogInterval {
		o.log.Warn(msgFailing, "err", err, "failures", o.unlogged, "failing_for", now.Sub(o.since).Round(time.Second))
		o.lastLine, o.unlogged = now, 0
	}
}

func (o *outage) recover() {
	o.status.Succeeded()
	if o.failing {
		o.failing = false
		o.log.Info(msgRecovered, "failing_for", time.Since(o.since).Round(time.Millisecond))
	}
}
