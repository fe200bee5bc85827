package consul

import (
	"slices"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// retries holds the reads to make at a later time: the retries of the
// reads that failed, and the reads delayed because an answer was behind
// (readQueue.accept). A failed read of one service is retried alone, with
// a backoff of its own that only its own success resets: a 429 or a cut
// connection costs one read more, not a re-read of every service, and a
// throttled read cannot be hurried by the successes of others. A read due
// is queued again by the read queue (promote).
type retries struct {
	cat      catalog
	min, max time.Duration
	// list holds the retries in the order their reads failed; each
	// belongs to its service's record (readState.retry), and the list
	// drops a retry its record no longer holds (live).
	list  []*readRetry
	later []delayedRead
}

// readRetry is the retry state of one failed read of a service, held by
// its record until a read of it succeeds.
type readRetry struct {
	st *svcState
	bo sources.Backoff
	at time.Time // when the retry is due; zero once it was queued
}

// delayedRead is a read to queue at a later time.
type delayedRead struct {
	at  time.Time
	key svcKey
}

// pending reports whether r is a read waiting for its backoff.
func (r *readRetry) pending() bool { return r != nil && !r.at.IsZero() }

// fail schedules the retry of a failed read of st.
func (rs *retries) fail(st *svcState) {
	if st.read.retry == nil {
		st.read.retry = &readRetry{st: st, bo: sources.Backoff{Min: rs.min, Max: rs.max}}
		rs.list = append(rs.list, st.read.retry)
	}
	st.read.retry.at = time.Now().Add(st.read.retry.bo.Next())
	st.read.viaCache = false // retried without the agent cache
	st.read.dirty = prioNone // the retry reads it; a change meanwhile waits for it
}

// after delays a read of service k by d.
func (rs *retries) after(k svcKey, d time.Duration) {
	rs.later = append(rs.later, delayedRead{at: time.Now().Add(d), key: k})
}

// live reports whether r is still the retry of a service the catalog
// knows: no read of it succeeded since, and it was not removed.
func (rs *retries) live(r *readRetry) bool {
	return r.st.read.retry == r && rs.cat.find(r.st.key) == r.st
}

// due returns the services whose delayed read or retry is due at now,
// and forgets what is gone.
func (rs *retries) due(now time.Time) []*svcState {
	var out []*svcState
	keep := rs.later[:0]
	for _, d := range rs.later {
		st := rs.cat.find(d.key)
		switch {
		case st == nil:
		case d.at.After(now):
			keep = append(keep, d)
		default:
			out = append(out, st)
		}
	}
	rs.later = keep
	live := rs.list[:0]
	for _, r := range rs.list {
		if !rs.live(r) {
			continue
		}
		live = append(live, r)
		if r.pending() && !r.at.After(now) {
			r.at = time.Time{}
			out = append(out, r.st)
		}
	}
	clear(rs.list[len(live):])
	rs.list = live
	return out
}

// now makes every retry due now: what failed may work again (the agent
// answers again, the token changed). Each retry's backoff starts over; the
// next failure waits retry_min.
func (rs *retries) now() {
	for _, r := range rs.list {
		if rs.live(r) {
			r.bo.Reset()
			r.at = time.Now()
		}
	}
}

// failing reports whether the last read of some service failed.
func (rs *retries) failing() bool {
	return slices.ContainsFunc(rs.list, rs.live)
}

// wake is when the next retry or delayed read is due, or the zero time.
func (rs *retries) wake() time.Time {
	var next time.Time
	for _, r := range rs.list {
		if rs.live(r) && !r.at.IsZero() {
			next = earliest(next, r.at)
		}
	}
	for _, d := range rs.later {
		next = earliest(next, d.at)
	}
	return next
}
