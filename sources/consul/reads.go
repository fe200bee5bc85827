package consul

import (
	"context"
	"time"
)

// readGap is the spacing of reads for a rate (reads per second; 0 means
// unpaced).
func readGap(rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / rate)
}

// readPrio orders reads: a read that follows a precise signal (a check
// change, a new service, a retry) goes ahead of the reads of a sweep, so a
// critical check is served in milliseconds even while a sweep of
// thousands of services runs.
type readPrio uint8

const (
	prioNone readPrio = iota
	prioSweep
	prioChange
	prioCount
)

// markDirty queues a read of st that bypasses the agent cache.
func (l *loop) markDirty(st *svcState) {
	st.viaCache = false
	l.queueRead(st, prioChange)
}

// markSwept queues a read of st for a sweep, from the agent cache with
// sweep_cached.
func (l *loop) markSwept(st *svcState) {
	if st.dirty == prioNone && l.s.cfg.sweepCached() {
		st.viaCache = true
	}
	l.queueRead(st, prioSweep)
}

// markSignal queues a read of st for a change a bulk query attributed to
// it, unless st is watched: its watch answers with the change itself.
func (l *loop) markSignal(st *svcState) {
	if st.watch == nil {
		l.markDirty(st)
	}
}

// markChanged queues a read of st for a check change at index: a read
// that may use the agent cache (cached: true), and must answer at least
// index. A watched service is not read: its watch answers with the change
// (a check change moves the service's index).
func (l *loop) markChanged(st *svcState, index uint64) {
	if st.watch != nil {
		return
	}
	if st.dirty == prioNone && l.s.cfg.Cached {
		st.viaCache = true
	}
	st.want = max(st.want, index)
	l.queueRead(st, prioChange)
}

// promoteDue queues the delayed reads and the retries whose time has come.
func (l *loop) promoteDue() {
	now := time.Now()
	keep := l.later[:0]
	for _, d := range l.later {
		st := l.dcs[d.key.dc].services[d.key.name]
		switch {
		case st == nil:
		case d.at.After(now):
			keep = append(keep, d)
		default:
			l.markDirty(st)
		}
	}
	l.later = keep
	l.promoteRetries(now)
}

// queueRead queues a read of st at priority p unless one is queued
// already at p or higher (a sweep read raised to a change read is queued
// again; the entry met first is dispatched, the other skipped). A read in
// flight is repeated when it returns, because it may predate the change; a
// read waiting for its retry backoff is left to the retry.
func (l *loop) queueRead(st *svcState, p readPrio) {
	if st.dirty >= p || st.retry.pending() {
		return
	}
	st.dirty = p
	if !st.inflight {
		l.queue[p] = append(l.queue[p], st.key)
	}
}

// requeue puts a read that became dirty while in flight in its queue.
func (l *loop) requeue(st *svcState) {
	if p := st.dirty; p != prioNone {
		l.queue[p] = append(l.queue[p], st.key)
	}
}

func (l *loop) queued() bool {
	return len(l.queue[prioChange]) > 0 || len(l.queue[prioSweep]) > 0
}

// next pops the next read to start, change reads first; sweep reads only
// when sweeps may start one now. It returns nil when there is none. Keys
// whose record is gone, or whose read was made meanwhile, are skipped.
func (l *loop) next(sweeps bool) *svcState {
	for p := prioCount - 1; p > prioNone; p-- {
		if p == prioSweep && !sweeps {
			break
		}
		for len(l.queue[p]) > 0 {
			k := l.queue[p][0]
			l.queue[p] = l.queue[p][1:]
			if len(l.queue[p]) == 0 {
				l.queue[p] = nil // let the backing array go
			}
			if st := l.dcs[k.dc].services[k.name]; st != nil && st.dirty != prioNone && !st.inflight {
				return st
			}
		}
	}
	return nil
}

// dispatch starts queued reads while fewer than the read slots are in
// flight, spaced by max_read_rate when set, sweep reads as the sweep pacer
// allows (sweep.go). Nothing starts while the probe finds the agent down:
// the reads would only fail; the probe's recovery starts them.
func (l *loop) dispatch(ctx context.Context) {
	now := time.Now()
	if l.agent.phase != agentUp || now.Before(l.paceAt) {
		return
	}
	for l.inflight < l.slots && l.queued() {
		if l.readGap > 0 {
			if now.Before(l.nextRead) {
				l.paceAt = l.nextRead // arm wakes the loop then
				return
			}
		}
		st := l.next(l.sweepReady(now))
		if st == nil {
			return
		}
		if l.readGap > 0 {
			l.nextRead = now.Add(l.readGap)
		}
		k := st.key
		r := fetchResult{key: k, st: st, cached: st.viaCache, sweep: st.dirty == prioSweep, epoch: l.epoch}
		// A sweep asks only for the index of a service it knows (a peek),
		// and reads it in full when the index moved.
		r.peek = r.sweep && st.index != 0
		st.dirty, st.viaCache, st.inflight = prioNone, false, true
		l.inflight++
		if r.sweep {
			l.sweeping++
		}
		l.seq++
		r.seq = l.seq
		dc := l.dcs[k.dc].name
		l.wg.Go(func() {
			start := time.Now()
			if r.peek {
				r.meta, r.err = l.s.peek(ctx, l.c, dc, k.name, r.cached)
			} else {
				r.entries, r.meta, r.err = l.s.read(ctx, l.c, dc, k.name, r.cached, 0)
			}
			if ctx.Err() != nil {
				return // shutting down: not a failure to report
			}
			r.took = time.Since(start)
			if r.meta != nil {
				r.index = r.meta.LastIndex
			}
			send(ctx, l.results, r)
		})
	}
}
