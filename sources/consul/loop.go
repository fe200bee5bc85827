package consul

import (
	"context"
	"fmt"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// loop is the select that drives the parts of a running source: it hands
// each event to the part that owns it (a bulk query's answer to the
// signals, a read's to the read queue, a watch's to the watch set, a
// probe's to the agent monitor), then turns the parts once (turn). Only
// its goroutine touches their state.
type loop struct {
	s       *Source
	cl      *agentClient
	agent   *agentMonitor
	cat     catalog
	sig     *signals
	reads   *readQueue
	watches *watchSet
	sweeps  *sweeper
	pub     *publisher
	cov     *coverage
}

// events are the channels the loop selects on besides its timers.
type events struct {
	polls   <-chan pollResult
	probes  <-chan probeResult
	reads   <-chan fetchResult
	watches <-chan watchAnswer
	// budget: the source's share of its agent's budget changed.
	budget <-chan struct{}
}

func (l *loop) run(ctx context.Context, ev events, up chan<- sources.Update) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var tokenTick <-chan time.Time
	if l.s.cfg.TokenFile != "" {
		t := time.NewTicker(tokenCheckInterval)
		defer t.Stop()
		tokenTick = t.C
	}
	for {
		if !l.turn(ctx, up) {
			return ctx.Err()
		}
		l.arm(timer)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-ev.polls:
			l.onPoll(r)
		case r := <-ev.reads:
			l.reads.done(r)
		case r := <-ev.watches:
			l.watches.done(r)
		case r := <-ev.probes:
			l.agent.onProbe(r)
			if r.self != nil {
				l.newLimit(r.self.maxConnsPerClient)
			}
		case <-ev.budget:
			l.replan(l.s.plan.agentLimit)
		case <-tokenTick:
			l.reloadToken()
		case <-timer.C:
		}
	}
}

// turn drives the parts after each event: what the agent's answers
// changed is applied, the services read anew take watches, due reads and
// sweeps are queued and started, what changed is published, and the
// status is brought up to date. It returns false when ctx ended.
func (l *loop) turn(ctx context.Context, up chan<- sources.Update) bool {
	l.settle()
	l.watches.adopt(l.reads.takeFresh())
	l.reads.promote()
	l.sweeps.maybe()
	l.reads.dispatch(ctx)
	first, ok := l.pub.publish(ctx, up)
	if !ok {
		return false
	}
	if first {
		if len(l.agent.pollErr) == 0 {
			l.agent.recovered()
		}
		l.cov.warn(l.watches.facts(), l.s.plan.http2)
	}
	if l.cov.due {
		l.cov.show(l.watches.facts(), l.sweeps.facts(), l.s.plan.http2)
	}
	if l.pub.synced && !l.agent.failing() && !l.reads.retries.failing() && l.watches.failing == 0 {
		l.agent.recovered()
	}
	return true
}

// arm sets timer to the next moment the parts have something to do by
// themselves: a paced read, a retry, a delayed read or a deferred sweep.
func (l *loop) arm(t *time.Timer) {
	d := time.Hour
	if next := earliest(l.reads.wake(), l.sweeps.wake()); !next.IsZero() {
		d = max(time.Until(next), time.Millisecond)
	}
	t.Reset(d)
}

// onPoll hands an answer of a bulk query, or a census, to its part.
func (l *loop) onPoll(r pollResult) {
	if r.epoch != l.cl.gen.resets() {
		return // asked before the last reset; asked again since
	}
	if r.census != nil {
		l.sweeps.onCensus(r.dc, r.census)
		return
	}
	l.agent.polled(r.dc, r.kind, r.err)
	if r.err != nil || l.agent.answered() {
		return
	}
	l.agent.noteLeader(r.meta)
	if r.unchanged {
		return
	}
	if r.reset {
		// The index went backwards (a snapshot restore, a cluster
		// rebuilt, an agent restarted empty): the state may be refilling.
		l.agent.noteReset(fmt.Sprintf("the index of %s in %s went backwards", r.kind, l.cat[r.dc].name))
	}
	switch r.kind {
	case pollServices:
		l.sig.onServices(r.dc, r.services, r.meta.ResultsFilteredByACLs)
	case pollChecks:
		l.sig.onChecks(r.dc, r.checks)
	case pollNodes:
		l.sig.onNodes(r.dc, r.nodes, r.onNew)
	}
}

// settle applies what the agent monitor noted: a reset or a resume, and a
// token to read again after a 403. The gate opens after them.
func (l *loop) settle() {
	switch change, why := l.agent.take(); change {
	case agentReset:
		l.reset(why)
	case agentResumed:
		l.resume()
	}
	if l.agent.forbidden {
		l.agent.forbidden = false
		l.reloadToken()
	}
	l.agent.settled()
}

// reset: Consul lost its state since the source last read it. The next
// update carries Reset; the blocking queries start over from index 0 (a
// query blocked on an index of the old state would wait out its wait),
// every watch too, every unwatched service is read again, and what was
// asked before the reset is not applied (the generation's resets are the
// epoch of every answer).
func (l *loop) reset(why string) {
	l.pub.markReset(why)
	l.cl.gen.restart()
	l.cat.each(func(st *svcState) {
		st.seen.index, st.seen.peekIndex, st.read.want, st.read.behind = 0, 0, 0, 0
		if st.watch != nil {
			l.watches.restart(st)
		} else {
			l.reads.markDirty(st)
		}
	})
	l.reads.retries.now()
}

// resume: the agent answers again after an outage, with its state.
// Requests stuck on connections of the failed period are cut and asked
// again, the blocking queries from index 0 (see queryMarks); every read
// waiting for its backoff is due now; watches ask again from where they
// were (a change during the outage answers at once); and every unwatched
// service is swept, for the changes no bulk query attributes.
func (l *loop) resume() {
	l.cl.gen.resume()
	l.reads.retries.now()
	l.sweeps.wantUnwatched()
}

// reloadToken reads token_file again. A new token renews the generation,
// so that what failed with the old one is asked again at once, and asks
// the probe for the agent's configuration, which the old token may not
// have been allowed to read (the connection plan follows it: replan).
func (l *loop) reloadToken() {
	changed, err := l.cl.tok.reload()
	if err != nil {
		l.s.log.Debug("token_file unreadable; keeping the current token", "err", err)
		return
	}
	if changed {
		l.s.log.Info("token_file changed; using the new token")
		l.cl.gen.renew()
		l.reads.retries.now()
		l.agent.wake()
	}
}

// newLimit follows the agent's connection limit when the agent shows one
// other than the plan was made for: a token that could not read the
// agent's configuration at startup (the plan then assumed fallbackConns)
// and can now, or an agent whose limit was changed and reloaded. A budget
// set by max_connections does not follow it.
func (l *loop) newLimit(limit int) {
	old := l.s.plan
	if limit <= 0 || limit == old.agentLimit || !old.derived {
		return
	}
	want, _ := l.s.cfg.alone(limit)
	l.cl.conns.setWant(want)
	l.replan(limit)
}

// replan makes the plan again for the agent's limit and the source's
// share of its agent's budget now, when they give another plan. Reads
// keep at most the connections the main client was built with, and when
// they are fewer, the main client's idle connections beyond them close
// (readQueue.resize); the watch lanes grow or shrink.
func (l *loop) replan(limit int) {
	old := l.s.plan
	p := l.s.cfg.planShare(old.http2, limit, l.cl.conns.current())
	if !p.http2 {
		p.reads = min(p.reads, l.s.mainReads)
	}
	if p == old {
		return
	}
	l.s.plan = p
	l.reads.resize(p.reads, !p.http2)
	l.s.logPlan()
	if err := l.watches.resize(p.lanes); err != nil {
		l.s.log.Warn("building watch connections for the new plan failed; watching on fewer", "err", err)
	}
}
