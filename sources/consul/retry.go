package consul

import (
	"net/http"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Failures are handled where they happen. A failed read of one service is
// retried alone, with a backoff of its own that only its own success
// resets: a 429 or a cut connection costs one read more, not a re-read of
// every service, and a throttled read cannot be hurried by the successes
// of others. A failed blocking query backs off likewise in its goroutine
// (poll). While the probe finds the agent down, no read starts at all;
// when the probe finds it back, the generation is renewed and every
// pending retry is due at once (retryNow).

// readRetry is the retry state of one failed read of a service, held by
// its record (svcState.retry) until a read of it succeeds. The loop also
// lists it (loop.retries), to find the retries due without looking at
// every record; the list drops a retry its record no longer holds (live).
type readRetry struct {
	st *svcState
	bo sources.Backoff
	at time.Time // when the retry is due; zero once it was queued
}

// retryLater schedules the retry of a failed read of st.
func (l *loop) retryLater(st *svcState) {
	if st.retry == nil {
		st.retry = &readRetry{st: st, bo: sources.Backoff{Min: l.s.cfg.RetryMin, Max: l.s.cfg.RetryMax}}
		l.retries = append(l.retries, st.retry)
	}
	st.retry.at = time.Now().Add(st.retry.bo.Next())
	st.viaCache = false // retried without the agent cache
	st.dirty = prioNone // the retry reads it; a change meanwhile waits for it
}

// pending reports whether r is a read waiting for its backoff.
func (r *readRetry) pending() bool { return r != nil && !r.at.IsZero() }

// live reports whether r is still the retry of a service the loop knows:
// no read of it succeeded since, and it was not removed.
func (l *loop) live(r *readRetry) bool {
	return r.st.retry == r && l.dcs[r.st.key.dc].services[r.st.key.name] == r.st
}

// promoteRetries queues the retries whose backoff ended, and drops from
// the list those no longer live.
func (l *loop) promoteRetries(now time.Time) {
	keep := l.retries[:0]
	for _, r := range l.retries {
		if !l.live(r) {
			continue
		}
		keep = append(keep, r)
		if r.pending() && !r.at.After(now) {
			r.at = time.Time{}
			l.markDirty(r.st)
		}
	}
	clear(l.retries[len(keep):])
	l.retries = keep
}

// readsFailing reports whether the last read of some service failed.
func (l *loop) readsFailing() bool {
	for _, r := range l.retries {
		if l.live(r) {
			return true
		}
	}
	return false
}

// fail records a failure of a read, a blocking query or the probe. One
// without an HTTP answer (refused, cut, timed out, a failed handshake)
// may mean that the agent is gone: the probe is asked to look soon (a
// kick shortens its wait once; see monitor.go), and while the probe fails
// such an error says whether the agent's process went away.
func (l *loop) fail(err error) {
	l.s.failed(err)
	if statusCode(err) == 0 {
		select {
		case l.kick <- struct{}{}:
		default:
		}
		if l.agent.phase == agentDown && wentAway(err) {
			l.agent.gone = true
		}
	}
	if statusCode(err) == http.StatusForbidden {
		l.reloadToken()
	}
}

// failingNow reports whether something fails at this moment.
func (l *loop) failingNow() bool {
	return l.agent.phase != agentUp || len(l.pollErr) > 0 || l.readsFailing() || l.w.failing > 0 || l.leaderless
}

// checkRecovered ends a failing period once nothing fails any more, and
// refreshes the status of a healthy, synced source.
func (l *loop) checkRecovered() {
	if !l.synced || l.failingNow() {
		return
	}
	l.s.recovered()
}

// retryNow makes every read waiting for its backoff due now: what failed
// may work again (the agent answers again, the token changed). Each
// retry's backoff starts over; the next failure waits retry_min.
func (l *loop) retryNow() {
	for _, r := range l.retries {
		if l.live(r) {
			r.bo.Reset()
			r.at = time.Now()
		}
	}
}

// reloadToken reads token_file again. A new token renews the generation,
// so that what failed with the old one is asked again at once, and asks
// the probe for the agent's configuration, which the old token may not
// have been allowed to read (the connection plan follows it: replan).
func (l *loop) reloadToken() {
	changed, err := l.s.tok.reload()
	if err != nil {
		l.s.log.Debug("token_file unreadable; keeping the current token", "err", err)
		return
	}
	if changed {
		l.s.log.Info("token_file changed; using the new token")
		l.s.gen.renew()
		l.retryNow()
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}
