package consul

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Watches. A blocking query on /v1/health/service/<name> answers when
// that service changes, whatever the change: an instance added or removed
// with or without checks, a port or address re-registered, a check or
// maintenance flip. The bulk queries (poll.go) cannot attribute most of
// those, so without a watch such a change waits for a sweep. Each watched
// service holds one such query, on the connections max_connections leaves
// once reads, bulk queries and the probe have theirs ("lanes", one
// transport each, see newLane): over HTTP/2 a lane carries
// watches_per_connection queries as streams of one connection, over
// HTTP/1.1 one query. When there are more services than room, the room
// goes to the services that changed most recently (a service whose change
// a sweep or a signal found takes the place of the watched service that
// has gone longest without one, if that is older than watchKeep); the
// others are swept as before.
//
// A watch starts once its service has been read, at the index of that
// read: a change between the read and the watch answers at once. Its
// answers are applied like reads (loop.apply). It fails and backs off on
// its own, and restarts from index 0 (an immediate read) after a failure,
// as Consul's rules for blocking queries ask; after a reset it is started
// again from index 0 (noteReset). While the probe finds the agent down it
// waits at the gate.

// watchKeep is how long a watched service keeps its watch against a
// service that changed more recently. Changes come in runs (a deploy, a
// scale-up, a node drained), so the service that changed last is the
// likeliest to change next, and a watch should follow it soon; but not at
// once, so that services changing in turn move at most as many watches
// per watchKeep as there are lanes (over HTTP/1.1 each move closes a
// connection and opens another).
const watchKeep = 5 * time.Second

// watchRun is one service's watch, held by its record (svcState.watch).
type watchRun struct {
	lane   int
	cancel context.CancelFunc
	// sent: the watch's current request holds a stream (its latest
	// attempt wrote its headers); the loop counts these when the agent
	// shows its stream limit (errQueued).
	sent atomic.Bool
	// failed: its last request failed (the source is stale until it
	// answers again).
	failed bool
	// verify: the watch started after a reset, and checks its answers
	// against the servers until one agrees (verifyWatched).
	verify bool
}

// watchSet is the loop's view of the lanes and of what the watches on
// them add up to: how many each lane carries, and how many fail. Only
// maybeWatch, stopWatch and setFailed change these counts.
type watchSet struct {
	lanes   []*api.Client
	closers []*http.Transport
	load    []int
	perLane int
	// streams: the most requests one connection has been seen carrying
	// at once since the server showed it allows fewer streams than
	// perLane (see errQueued); 0 until then. Every lane is a connection
	// to the same server, with the same limit, so it is every lane's room.
	streams int
	// failing: the watches whose last request failed.
	failing int
}

func newWatchSet() *watchSet { return &watchSet{} }

// setupLanes builds the watch lanes of the connection plan. A lane's
// transport dials its connection with its first watch.
func (s *Source) setupLanes(w *watchSet) error {
	w.perLane = s.plan.perLane
	return w.grow(s, s.plan.lanes)
}

// grow adds lanes until there are n.
func (w *watchSet) grow(s *Source, n int) error {
	for len(w.lanes) < n {
		c, tr, err := s.newLane()
		if err != nil {
			return err
		}
		w.lanes = append(w.lanes, c)
		w.closers = append(w.closers, tr)
		w.load = append(w.load, 0)
	}
	return nil
}

// setLanes grows or shrinks the lanes to n (a new connection plan, see
// replan). The watches of the lanes that go end: their services are
// followed like any unwatched one, and take the room of a lane again as
// maybeWatch finds it.
func (l *loop) setLanes(n int) error {
	w := l.w
	if n < len(w.lanes) {
		for _, d := range l.dcs {
			for _, st := range d.services {
				if st.watch != nil && st.watch.lane >= n {
					l.stopWatch(st)
				}
			}
		}
		for _, tr := range w.closers[n:] {
			tr.CloseIdleConnections()
		}
		w.lanes, w.closers, w.load = w.lanes[:n], w.closers[:n], w.load[:n]
	}
	return w.grow(l.s, n)
}

func (w *watchSet) close() {
	for _, tr := range w.closers {
		tr.CloseIdleConnections()
	}
}

// setFailed records whether run fails now.
func (w *watchSet) setFailed(run *watchRun, failed bool) {
	switch {
	case run.failed == failed:
	case failed:
		w.failing++
	default:
		w.failing--
	}
	run.failed = failed
}

// room is how many watches lane i may carry.
func (w *watchSet) room(i int) int {
	if w.streams > 0 {
		return w.streams
	}
	return w.perLane
}

// watching is how many services are watched.
func (w *watchSet) watching() int {
	n := 0
	for _, k := range w.load {
		n += k
	}
	return n
}

// capacity is how many services can be watched at once.
func (w *watchSet) capacity() int {
	n := 0
	for i := range w.lanes {
		n += w.room(i)
	}
	return n
}

// freeLane returns the first lane with room, or -1. Filling lanes in order
// opens a connection only when the ones before it are full: over HTTP/2,
// 2,000 watches hold 10 connections whatever the budget.
func (w *watchSet) freeLane() int {
	for i, n := range w.load {
		if n < w.room(i) {
			return i
		}
	}
	return -1
}

// maybeWatch starts a watch of st after a read of it was applied, when a
// lane has room, or when the service just changed and a watched service
// has gone longer than watchKeep without a change (it gives up its
// watch).
func (l *loop) maybeWatch(st *svcState, changed bool) {
	if st.watch != nil || l.w.capacity() == 0 || !st.fetched {
		return
	}
	lane := l.w.freeLane()
	if lane < 0 {
		if !changed {
			return
		}
		victim := l.stalestWatch(time.Now().Add(-watchKeep))
		if victim == nil {
			return
		}
		l.stopWatch(victim)
		if lane = l.w.freeLane(); lane < 0 {
			return
		}
	}
	ctx, cancel := context.WithCancel(l.ctx)
	run := &watchRun{lane: lane, cancel: cancel, verify: l.epoch > 0}
	st.watch = run
	l.w.load[lane]++
	k, c, dc, index := st.key, l.w.lanes[lane], l.dcs[st.key.dc].name, st.index
	l.wg.Go(func() { l.s.watch(ctx, c, k, dc, run, index, l.results) })
	l.s.log.Debug("watching service", "service", k.name, "datacenter", dc, "index", index, "lane", lane)
	l.noteWatches()
}

// stalestWatch returns the watched service whose last change is the
// oldest, if older than before, else nil.
func (l *loop) stalestWatch(before time.Time) *svcState {
	var best *svcState
	for _, d := range l.dcs {
		for _, st := range d.services {
			if t := st.changedAt; st.watch != nil && t.Before(before) && (best == nil || t.Before(best.changedAt)) {
				best = st
			}
		}
	}
	return best
}

// stopWatch ends st's watch, if any: its goroutine ends, and its lane has
// room for another.
func (l *loop) stopWatch(st *svcState) {
	run := st.watch
	if run == nil {
		return
	}
	run.cancel()
	// Its next peek compares with what the watch applied last, not with
	// what a peek saw before the watch.
	st.peekIndex = 0
	l.s.log.Debug("no longer watching service", "service", st.key.name, "datacenter", l.dcs[st.key.dc].name)
	l.w.load[run.lane]--
	l.w.setFailed(run, false)
	st.watch = nil
	l.noteWatches()
}

func (l *loop) serviceCount() int {
	n := 0
	for _, d := range l.dcs {
		n += len(d.services)
	}
	return n
}

// onWatch applies an answer of a watch, or records its failure.
func (l *loop) onWatch(r fetchResult) {
	st := l.dcs[r.key.dc].services[r.key.name]
	if st == nil || st.watch != r.watch {
		return // stopped meanwhile
	}
	run := st.watch
	if errors.Is(r.err, errQueued) {
		// The server allows fewer streams per connection than
		// watches_per_connection: the lane keeps the watches that got a
		// stream, and the service goes to the next lane with room (or is
		// swept like any unwatched one). The lane's requests holding a
		// stream are at most the server's limit, and as many once the
		// lane is full; a busy host may not have written some of them
		// yet, so every lane's room is the most seen, raised by any later
		// sighting.
		if n := l.sentOn(run.lane); n > l.w.streams {
			if l.w.streams == 0 {
				l.s.log.Warn("the agent allows fewer HTTP/2 streams per connection than watches_per_connection; watching fewer services on each connection",
					"watches_per_connection", l.w.perLane, "streams", n)
			}
			l.w.streams = n
		}
		l.stopWatch(st)
		l.maybeWatch(st, false)
		return
	}
	if r.err != nil {
		l.w.setFailed(run, true)
		l.fail(r.err)
		return
	}
	l.w.setFailed(run, false)
	if l.answered() {
		return
	}
	l.apply(r, st)
}

// sentOn counts the watches of lane whose requests hold a stream now (at
// least 1).
func (l *loop) sentOn(lane int) int {
	n := 0
	for _, d := range l.dcs {
		for _, st := range d.services {
			if run := st.watch; run != nil && run.lane == lane && run.sent.Load() {
				n++
			}
		}
	}
	return max(1, n)
}

// watch runs the blocking query of one watched service until ctx ends,
// sending every answer whose index moved (and every failure) to out.
// Answers that only end the wait are not sent: the probe, not the
// watches, tells a hung agent from a quiet one. An index that went
// backwards is sent (the loop reads the service again) and blocked on
// from there.
func (s *Source) watch(ctx context.Context, c *api.Client, k svcKey, dc string, run *watchRun, index uint64, out chan<- fetchResult) {
	bo := sources.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax}
	var started time.Time
	verify := run.verify
	for {
		if wait := time.Until(started.Add(minPollInterval)); wait > 0 {
			if !sleep(ctx, wait) {
				return
			}
		}
		// Like reads, a watch asks nothing while the probe finds the agent
		// down: the probe paces an outage, and an agent that is starting
		// answers before it has its state back (without a leader, which a
		// watch's answer from a streaming view does not say), which must
		// not be served.
		if !s.gate.wait(ctx) {
			return
		}
		started = time.Now()
		entries, meta, queued, err := s.readWatched(ctx, c, dc, k.name, index, &run.sent)
		ahead := false
		if err == nil && verify && index > 0 && meta.LastIndex != index {
			if entries, meta, ahead, err = s.verifyWatched(ctx, c, dc, k.name, entries, meta); err == nil && !ahead {
				verify = false
			}
		}
		if ctx.Err() != nil {
			return
		}
		if queued {
			send(ctx, out, fetchResult{key: k, watch: run, err: errQueued})
			return
		}
		if errors.Is(err, errRenewed) {
			bo.Reset()
			continue
		}
		if err != nil {
			index = 0
			if !send(ctx, out, fetchResult{key: k, watch: run, err: err}) || !s.pause(ctx, bo.Next()) {
				return
			}
			continue
		}
		if !ahead {
			bo.Reset()
		}
		if meta.LastIndex == index {
			continue
		}
		index = max(meta.LastIndex, 1)
		if !send(ctx, out, fetchResult{key: k, watch: run, entries: entries, meta: meta, index: meta.LastIndex}) {
			return
		}
		if ahead && !s.pause(ctx, bo.Next()) {
			return
		}
	}
}

// verifyWatched checks a watch's answer against the servers after a
// reset. On a client agent a blocking health query is answered from the
// agent's view of the service (the streaming backend), and after the
// servers lost their state that view can go on holding the lost state for
// a while, with indexes the new state has not reached: a watch blocking on
// such an index waits for minutes while the service changes. A read that
// does not block reaches the servers. When the watch's answer is ahead of
// it, the read's answer is taken instead (ahead), and the watch asks
// again after a backoff until the view has caught up; once an answer is
// not ahead, the watch's answers are taken as they come.
func (s *Source) verifyWatched(ctx context.Context, c *api.Client, dc, service string, entries []*api.ServiceEntry, meta *api.QueryMeta) ([]*api.ServiceEntry, *api.QueryMeta, bool, error) {
	fresh, fmeta, err := s.read(ctx, c, dc, service, false, 0)
	switch {
	case err != nil:
		return nil, nil, false, err
	case fmeta.LastIndex < meta.LastIndex:
		s.log.Debug("the agent's view of a service is ahead of the servers after a reset; reading from the servers until it catches up",
			"service", service, "datacenter", dc, "view", meta.LastIndex, "servers", fmeta.LastIndex)
		return fresh, fmeta, true, nil
	}
	return entries, meta, false, nil
}

// errQueued says that a watch's request waited for a stream: the lane's
// connection carries as many requests as the agent (or a proxy in front of
// it) allows.
var errQueued = errors.New("no HTTP/2 stream for the watch: the connection carries as many requests as the server allows")

// streamWaitFactor: a watch whose request waited this many times
// read_timeout without being sent is taken as queued for a stream. A busy
// host can take a while to write the headers of a burst of requests on one
// connection, and a watch given up for that would lower its lane's room
// for good; a server that allows fewer streams keeps the request waiting
// for ever, so waiting longer only delays noticing it.
const streamWaitFactor = 4

// readWatched is read for a watch, which also reports whether the request
// waited streamWaitFactor read_timeouts without being sent. Over HTTP/2 a
// lane's requests beyond the server's stream limit wait for a stream (the
// transport is strict); a watch waiting so would watch nothing until
// another ends, possibly minutes later, while its service counted as
// watched and was not swept. sent says whether the request holds a stream.
func (s *Source) readWatched(ctx context.Context, c *api.Client, dc, service string, index uint64, sent *atomic.Bool) ([]*api.ServiceEntry, *api.QueryMeta, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each attempt of the request starts with GotConn: the transport
	// retries a request whose stream the server refused, which happens
	// to requests sent on a new connection before its stream limit was
	// known (the server's settings had not arrived). Such a request wrote
	// its headers once and now waits for a stream, so "sent" is the state
	// of the latest attempt, not of the first.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { sent.Store(false) },
		WroteHeaders: func() { sent.Store(true) },
	})
	var queued atomic.Bool
	t := time.AfterFunc(streamWaitFactor*s.cfg.ReadTimeout, func() {
		if !sent.Load() {
			queued.Store(true)
			cancel()
		}
	})
	entries, meta, err := s.read(ctx, c, dc, service, false, index)
	t.Stop()
	return entries, meta, queued.Load(), err
}
