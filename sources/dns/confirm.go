package dns

import (
	"context"
	"time"
)

// A name that had endpoints and is answered authoritatively empty
// (NXDOMAIN, NODATA) goes dark. Reported alone, each such name is one
// service going dark, which the removal guard lets through; a resolver
// that has lost a whole zone would then empty the source name by name, as
// each name's TTL expires, and the guard would hold only the last one. So
// a darkening waits for a confirmation round: every other name that has
// endpoints is looked up once more, at once, and the outcomes are reported
// together with the darkening, as one update that the guard judges whole.
// When only that name is gone, the update carries it alone, one round of
// queries later; when the resolver lost everything, the update empties
// the source and is held.
//
// The rules:
//   - A darkening is reported with the outcomes of a round that started
//     after it, or of a round that itself found the name dark (a name's
//     own refresh and a round can cross).
//   - A round that fails to look a name up keeps that name's last state,
//     as a failed refresh does.
//   - Rounds start at most once per refresh.min: a darkening that comes
//     while a round runs, or sooner than that after the last one started,
//     waits and joins the next round. So confirmation never queries
//     faster than the source would if every name's TTL were refresh.min,
//     however many names flap, and a flapping name that lights up again
//     while it waits is never reported dark.
//   - With no other name that has endpoints, there is nothing to confirm:
//     the darkening is reported at once.
//   - Rounds do not move the names' own refresh schedules.

// confirmQueries is how many names a confirmation round looks up at once.
const confirmQueries = 8

// rounds schedules the confirmation rounds of one source. Rounds are
// numbered from 1; a round with no name to look up completes when it
// starts and does not count against the rate.
type rounds struct {
	every   time.Duration // the least time between the starts of two rounds
	started int
	done    int
	last    time.Time // when the last round with queries started
}

// due reports whether a round may start at now; when it may not and no
// round is running, wait is when it may.
func (r *rounds) due(now time.Time) (ok bool, wait time.Time) {
	switch {
	case r.started > r.done:
		return false, time.Time{}
	case r.last.IsZero() || now.Sub(r.last) >= r.every:
		return true, time.Time{}
	}
	return false, r.last.Add(r.every)
}

// start records that a round looking up n names starts at now, and
// returns its number.
func (r *rounds) start(now time.Time, n int) int {
	r.started++
	if n == 0 {
		r.done = r.started
	} else {
		r.last = now
	}
	return r.started
}

// confirm looks up the entries idx, confirmQueries at a time, and sends
// their outcomes, marked with round, as one batch on out (which must have
// room for it). It sends nothing when ctx ends first.
func (s *Source) confirm(ctx context.Context, r *resolver, round int, idx []int, out chan<- []outcome) {
	outs := make([]outcome, len(idx))
	bounded(ctx, len(idx), confirmQueries, func(k int) {
		at := time.Now()
		res, err := lookup(ctx, r, s.entries[idx[k]], s.family)
		outs[k] = outcome{i: idx[k], res: res, err: err, at: at, round: round}
	})
	if ctx.Err() != nil {
		return
	}
	out <- outs
}
