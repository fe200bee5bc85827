package consul

import (
	"net/http"
	"time"
)

// Failures are handled where they happen. A failed read of one service is
// retried alone, with a backoff of its own that only its own success
// resets: a 429 or a cut connection costs one read more, not a re-read of
// every service, and a throttled read cannot be hurried by the successes
// of others. A failed blocking query backs off likewise in its goroutine
// (poll). While the probe finds the agent down, no read starts at all;
// when the probe finds it back, the generation is renewed and every
// pending retry is due at once.

// readRetry is the retry state of one failed read.
type readRetry struct {
	bo backoff
	at time.Time // when the retry is due; zero once it was queued
}

// retryLater schedules the retry of a failed read of k.
func (l *loop) retryLater(k svcKey) {
	r := l.retries[k]
	if r == nil {
		r = &readRetry{bo: backoff{min: l.s.cfg.RetryMin, max: l.s.cfg.RetryMax}}
		l.retries[k] = r
	}
	r.at = time.Now().Add(r.bo.next())
	delete(l.viaCache, k) // retried without the agent cache
	delete(l.dirty, k)    // the retry reads it; a change meanwhile waits for it
}

// readSucceeded forgets the retry state of k.
func (l *loop) readSucceeded(k svcKey) { delete(l.retries, k) }

// retryPending reports whether a read of k waits for its backoff.
func (l *loop) retryPending(k svcKey) bool {
	r := l.retries[k]
	return r != nil && !r.at.IsZero()
}

// promoteRetries queues the retries whose backoff ended.
func (l *loop) promoteRetries(now time.Time) {
	for k, r := range l.retries {
		if !r.at.IsZero() && !r.at.After(now) {
			r.at = time.Time{}
			l.markDirty(k)
		}
	}
}

// fail records a failure of a read, a blocking query or the probe.
func (l *loop) fail(err error) {
	l.s.failed(err)
	l.failing = true
	if statusCode(err) == 0 {
		// No HTTP answer (refused, cut, timed out): the agent may be
		// gone; probe now rather than at the next healthy interval.
		l.rewake = true
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	if statusCode(err) == http.StatusForbidden {
		l.reloadToken()
	}
}

// failingNow reports whether something fails at this moment.
func (l *loop) failingNow() bool {
	return l.probeErr != nil || len(l.pollErr) > 0 || len(l.retries) > 0 || len(l.w.failed) > 0 || l.leaderless
}

// checkRecovered ends a failing period once nothing fails any more, and
// refreshes the status of a healthy, synced source.
func (l *loop) checkRecovered() {
	if !l.synced || l.failingNow() {
		return
	}
	if l.failing {
		l.failing = false
		l.s.log.Info(msgRecovered)
	}
	l.s.status.Succeeded()
}

// onProbe applies a probe's outcome. A good probe after requests failed
// without an answer renews the generation: requests stuck on the failed
// agent are cut, and every backoff ends.
func (l *loop) onProbe(r probeResult) {
	if r.err != nil {
		l.probeErr = r.err
		l.probeFailing.Store(true)
		l.agent.down = true
		l.rewake = true
		l.fail(r.err)
		return
	}
	l.probeErr = nil
	l.probeFailing.Store(false)
	l.noteIdentity(r.nodeID)
	l.answered()
	if l.rewake {
		l.renew()
	}
}

// renew starts a new generation: blocking queries and reads in flight are
// asked again, and every retry is due now.
func (l *loop) renew() {
	l.rewake = false
	l.s.gen.renew()
	for _, r := range l.retries {
		r.bo.reset()
		r.at = time.Now()
	}
}

// reloadToken reads token_file again; a new token renews the generation,
// so that what failed with the old one is asked again at once.
func (l *loop) reloadToken() {
	changed, err := l.s.tok.reload()
	if err != nil {
		l.s.log.Debug("token_file unreadable; keeping the current token", "err", err)
		return
	}
	if changed {
		l.s.log.Info("token_file changed; using the new token")
		l.renew()
	}
}
