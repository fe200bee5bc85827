package consul

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// readQueue makes the non-blocking reads of single services: the reads
// the signals, censuses, sweeps and retries ask for wait in one lane per
// priority, each service queued once; they start as the connection plan's
// reads allow (slots), spaced by max_read_rate when set, sweep reads as
// the sweep pacer allows; and their answers are accepted (or read again
// when they are behind) and handed to the publisher. A service read anew
// is offered to the watch set (takeFresh). Nothing starts while the probe
// finds the agent down: the reads would only fail, and the probe's
// recovery starts them.
type readQueue struct {
	cat   catalog
	cl    *agentClient
	agent *agentMonitor
	pub   *publisher
	// lanes: the keys of the services to read, in order, one lane per
	// priority (see push).
	lanes [prioCount][]svcKey
	// inflight: the reads in flight, at most slots. trim: the slots
	// shrank over HTTP/1.1, and the main client's idle connections close
	// once no more reads are in flight than the slots (see resize).
	inflight, slots int
	trim            bool
	seq             uint64 // reads dispatched so far
	retries         retries
	pace            readPace
	// batch: the reads of the running sweep (sweeper), nil when none
	// runs.
	batch *sweepBatch
	// fresh: the services read since the watch set last took them.
	fresh []freshRead
	out   chan fetchResult
	wg    *sync.WaitGroup
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

// readState is what the read queue keeps in a service's record.
type readState struct {
	// dirty is the priority of the read to make (prioNone: none); the key
	// is then in that priority's lane, or is put there when the read in
	// flight returns (see push).
	dirty    readPrio
	inflight bool
	// want is the index a read must reach to reflect the check change
	// that queued it; a read answering below it (a lagging server, or the
	// agent cache not yet refreshed) is repeated after behindDelay, up to
	// behindRetries times. viaCache marks a read queued only by such check
	// changes: the only ones that may use the agent cache (cached: true).
	want     uint64
	behind   int
	viaCache bool
	// retry: the last read failed, and this is its retry (retries).
	retry *readRetry
}

const (
	behindDelay   = 50 * time.Millisecond
	behindRetries = 20
)

// readPace spaces the reads: max_read_rate's gap between two reads, and
// the sweep pacer for sweep reads.
type readPace struct {
	gap  time.Duration
	at   time.Time // no read starts before this
	next time.Time // the earliest start of the next read
	// sweep charges sweep reads against the agent's time; sweeping
	// counts those in flight, at most sweepSlots.
	sweep    pacer
	sweeping int
}

// readGap is the spacing of reads for a rate (reads per second; 0 means
// unpaced).
func readGap(rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / rate)
}

// fetchResult is the outcome of one /v1/health/service read.
type fetchResult struct {
	key     svcKey
	st      *svcState // the record the read was started for
	seq     uint64    // dispatch sequence number
	epoch   uint64    // the resets before it started
	entries []*api.ServiceEntry
	meta    *api.QueryMeta
	cached  bool // read from the agent cache
	index   uint64
	err     error
	// sweep: a read of a sweep, paced; peek: it asked for the service's
	// index only. took is its round trip.
	sweep, peek bool
	took        time.Duration
}

// freshRead is a service whose read was applied, and whether the read
// changed what it serves.
type freshRead struct {
	st      *svcState
	changed bool
}

// sweepBatch is the reads of one sweep: the services it waits for (those
// whose record points to it), and how many of them it found changed.
type sweepBatch struct {
	seq   uint64 // reads dispatched from this sequence on count
	left  int
	found int
}

// looked records that the sweep no longer waits for st (it was read, or
// removed).
func (b *sweepBatch) looked(st *svcState) {
	if st.sweep == b {
		st.sweep = nil
		b.left--
	}
}

func newReadQueue(cat catalog, cl *agentClient, agent *agentMonitor, pub *publisher, slots int, out chan fetchResult, wg *sync.WaitGroup) *readQueue {
	return &readQueue{cat: cat, cl: cl, agent: agent, pub: pub, slots: slots, out: out, wg: wg,
		pace:    readPace{gap: readGap(cl.cfg.MaxReadRate)},
		retries: retries{cat: cat, min: cl.cfg.RetryMin, max: cl.cfg.RetryMax}}
}

// markDirty queues a read of st that bypasses the agent cache.
func (q *readQueue) markDirty(st *svcState) {
	st.read.viaCache = false
	q.push(st, prioChange)
}

// markSwept queues a read of st for a sweep, from the agent cache with
// sweep_cached.
func (q *readQueue) markSwept(st *svcState) {
	if st.read.dirty == prioNone && q.cl.cfg.sweepCached() {
		st.read.viaCache = true
	}
	q.push(st, prioSweep)
}

// markSignal queues a read of st for a change a bulk query attributed to
// it, unless st is watched: its watch answers with the change itself.
func (q *readQueue) markSignal(st *svcState) {
	if st.watch == nil {
		q.markDirty(st)
	}
}

// markChanged queues a read of st for a check change at index: a read
// that may use the agent cache (cached: true), and must answer at least
// index. A watched service is not read: its watch answers with the change
// (a check change moves the service's index).
func (q *readQueue) markChanged(st *svcState, index uint64) {
	if st.watch != nil {
		return
	}
	if st.read.dirty == prioNone && q.cl.cfg.Cached {
		st.read.viaCache = true
	}
	st.read.want = max(st.read.want, index)
	q.push(st, prioChange)
}

// push queues a read of st at priority p unless one is queued already at
// p or higher (a sweep read raised to a change read is queued again; the
// entry met first is dispatched, the other skipped). A read in flight is
// repeated when it returns, because it may predate the change; a read
// waiting for its retry backoff is left to the retry.
func (q *readQueue) push(st *svcState, p readPrio) {
	if st.read.dirty >= p || st.read.retry.pending() {
		return
	}
	st.read.dirty = p
	if !st.read.inflight {
		q.lanes[p] = append(q.lanes[p], st.key)
	}
}

// queued reports whether a read waits in a lane.
func (q *readQueue) queued() bool {
	return len(q.lanes[prioChange]) > 0 || len(q.lanes[prioSweep]) > 0
}

// next pops the next read to start, change reads first; sweep reads only
// when sweeps may start one now. It returns nil when there is none. Keys
// whose record is gone, or whose read was made meanwhile, are skipped.
func (q *readQueue) next(sweeps bool) *svcState {
	for p := prioCount - 1; p > prioNone; p-- {
		if p == prioSweep && !sweeps {
			break
		}
		for len(q.lanes[p]) > 0 {
			k := q.lanes[p][0]
			q.lanes[p] = q.lanes[p][1:]
			if len(q.lanes[p]) == 0 {
				q.lanes[p] = nil // let the backing array go
			}
			if st := q.cat.find(k); st != nil && st.read.dirty != prioNone && !st.read.inflight {
				return st
			}
		}
	}
	return nil
}

// promote queues the delayed reads and the retries whose time has come.
func (q *readQueue) promote() {
	for _, st := range q.retries.due(time.Now()) {
		q.markDirty(st)
	}
}

// dispatch starts queued reads while fewer than the slots are in flight,
// spaced by max_read_rate when set, sweep reads as the sweep pacer allows.
// Nothing starts while the probe finds the agent down.
func (q *readQueue) dispatch(ctx context.Context) {
	now := time.Now()
	if q.agent.phase != agentUp || now.Before(q.pace.at) {
		return
	}
	for q.inflight < q.slots && q.queued() {
		if q.pace.gap > 0 && now.Before(q.pace.next) {
			q.pace.at = q.pace.next // wake wakes the loop then
			return
		}
		st := q.next(q.pace.sweeping < sweepSlots && !q.pace.sweep.readyAt(now).After(now))
		if st == nil {
			return
		}
		if q.pace.gap > 0 {
			q.pace.next = now.Add(q.pace.gap)
		}
		q.start(ctx, st)
	}
}

// start starts a read of st.
func (q *readQueue) start(ctx context.Context, st *svcState) {
	k := st.key
	r := fetchResult{key: k, st: st, cached: st.read.viaCache, sweep: st.read.dirty == prioSweep, epoch: q.cl.gen.resets()}
	// A sweep asks only for the index of a service it knows (a peek), and
	// reads it in full when the index moved.
	r.peek = r.sweep && st.seen.index != 0
	st.read.dirty, st.read.viaCache, st.read.inflight = prioNone, false, true
	q.inflight++
	if r.sweep {
		q.pace.sweeping++
	}
	q.seq++
	r.seq = q.seq
	dc := q.cat[k.dc].name
	q.wg.Go(func() {
		start := time.Now()
		if r.peek {
			r.meta, r.err = q.cl.peek(ctx, q.cl.c, dc, k.name, r.cached)
		} else {
			r.entries, r.meta, r.err = q.cl.read(ctx, q.cl.c, dc, k.name, r.cached, 0)
		}
		if ctx.Err() != nil {
			return // shutting down: not a failure to report
		}
		r.took = time.Since(start)
		if r.meta != nil {
			r.index = r.meta.LastIndex
		}
		send(ctx, q.out, r)
	})
}

// done takes the outcome of a read: a failure is retried after the
// service's own backoff, a peek whose index moved is read in full, and an
// answer the read queue accepts is served (publisher.serveAnswer).
func (q *readQueue) done(r fetchResult) {
	st := r.st
	st.read.inflight = false
	q.inflight--
	q.trimIdle()
	if r.sweep {
		q.pace.sweeping--
		q.pace.sweep.spend(r.peek, r.took, time.Now())
	}
	if q.cat.find(r.key) != st {
		// Removed (or removed and added again: a new record, read on
		// its own) meanwhile: stale.
		return
	}
	// A read queued while this one was in flight was not put in a lane
	// (see push); it goes there now, whatever happens below.
	defer func() {
		if p := st.read.dirty; p != prioNone {
			q.lanes[p] = append(q.lanes[p], st.key)
		}
	}()
	if errors.Is(r.err, errRenewed) || r.epoch != q.cl.gen.resets() {
		// Cut short, or an answer about the state Consul lost.
		q.markDirty(st)
		return
	}
	if r.err != nil {
		q.agent.fail(r.err)
		q.retries.fail(st)
		q.swept(st, r.seq)
		return
	}
	st.read.retry = nil // its own success ends its backoff
	if q.agent.answered() {
		q.markDirty(st)
		return
	}
	if r.peek {
		q.peeked(r, st)
		return
	}
	if !r.cached {
		// Answers from the agent's cache (or its streaming views, which
		// the watches get) do not say whether the servers know a
		// leader; the bulk queries and the other reads do.
		q.agent.noteLeader(r.meta)
	}
	if !q.accept(st, r.index) {
		return
	}
	changed := q.pub.serveAnswer(st, r.entries, r.meta)
	if changed && q.batch != nil {
		q.batch.found++
	}
	q.swept(st, r.seq)
	q.fresh = append(q.fresh, freshRead{st: st, changed: changed})
}

// accept decides whether an answer at index, of a read or of a watch, is
// served: not when it is older than the answer served last (a stale read
// from a lagging server), which is read again shortly unless it stays so
// (then the cluster's state was reset: it is accepted). An answer behind
// the check change that queued the read is served, and the service read
// again shortly.
func (q *readQueue) accept(st *svcState, index uint64) bool {
	if st.seen.fetched && index < st.seen.index {
		if n := st.read.behind + 1; n <= behindRetries {
			st.read.behind = n
			q.retries.after(st.key, behindDelay)
			return false
		}
		st.read.behind = 0
	}
	st.seen.index = index
	switch n := st.read.behind + 1; {
	case index >= st.read.want:
		st.read.want, st.read.behind = 0, 0
	case n <= behindRetries:
		st.read.behind = n
		q.retries.after(st.key, behindDelay)
	default:
		q.agent.log.Debug("reads of a service stay behind its checks; giving up", "service", st.key.name, "index", index, "want", st.read.want)
		st.read.want, st.read.behind = 0, 0
	}
	return true
}

// peeked applies a peek: a service whose index moved since the last peek
// (or, on the first, since the answer served last) is read in full.
func (q *readQueue) peeked(r fetchResult, st *svcState) {
	was := st.seen.peekIndex
	if was == 0 {
		was = st.seen.index
	}
	st.seen.peekIndex = r.index
	if r.index != was {
		if q.batch != nil {
			q.batch.found++
		}
		q.markDirty(st)
	}
	q.swept(st, r.seq)
}

// resize sets the reads that may be in flight (a new connection plan).
// Over HTTP/1.1 each held a connection of the main client, which keeps
// them open while idle: when the reads are fewer, the idle connections
// close once the reads in flight are within the new slots, so that the
// main client holds no more than the plan counts.
func (q *readQueue) resize(slots int, http1 bool) {
	if slots < q.slots && http1 {
		q.trim = true
	}
	q.slots = slots
	q.trimIdle()
}

// trimIdle closes the main client's idle connections when resize asked
// for it and the reads in flight are within the slots.
func (q *readQueue) trimIdle() {
	if q.trim && q.inflight <= q.slots {
		q.trim = false
		q.cl.mainTr.CloseIdleConnections()
	}
}

// swept records that a read of st dispatched as seq answered or failed
// (a failed read is retried on its own; the sweep does not wait for it).
func (q *readQueue) swept(st *svcState, seq uint64) {
	if b := q.batch; b != nil && seq >= b.seq {
		b.looked(st)
	}
}

// startBatch starts the batch of a sweep.
func (q *readQueue) startBatch() *sweepBatch {
	q.batch = &sweepBatch{seq: q.seq + 1}
	return q.batch
}

// endBatch ends the running sweep's batch.
func (q *readQueue) endBatch() { q.batch = nil }

// takeFresh returns the services read since the last call.
func (q *readQueue) takeFresh() []freshRead {
	f := q.fresh
	q.fresh = nil
	return f
}

// wake is when the read queue has something to do by itself (a paced read
// to start, a retry or a delayed read due), or the zero time.
func (q *readQueue) wake() time.Time {
	var next time.Time
	if q.queued() && q.pace.at.After(time.Now()) {
		next = q.pace.at
	}
	if len(q.lanes[prioSweep]) > 0 && q.pace.sweeping < sweepSlots {
		next = earliest(next, q.pace.sweep.readyAt(time.Now()))
	}
	return earliest(next, q.retries.wake())
}

// earliest returns the earlier of two times, the zero time standing for
// none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
