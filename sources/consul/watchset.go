package consul

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// watchSet holds the watches: a blocking query per watched service on
// /v1/health/service/<name>, which answers when that service changes,
// whatever the change (an instance added or removed with or without
// checks, a port or address re-registered, a check or maintenance flip).
// The bulk queries cannot attribute most of those, so without a watch such
// a change waits for a census or a sweep. The watches ride on the
// connections the plan leaves once reads, bulk queries and the probe have
// theirs (lanes): over HTTP/2 a lane carries watches_per_connection
// queries as streams of one connection, over HTTP/1.1 one query. When
// there are more services than room, the room goes to the services that
// changed most recently: a service whose change a read found takes the
// place of the watched service that has gone longest without one, if that
// is older than watchKeep.
//
// A watch starts once its service has been read, at the index of that
// read: a change between the read and the watch answers at once. Its
// answers are accepted and served like reads'. It fails and backs off on
// its own (watchRun), and restarts from index 0 after a failure, as
// Consul's rules for blocking queries ask; after a reset it is started
// again from index 0 (restart).
type watchSet struct {
	cat   catalog
	cl    *agentClient
	agent *agentMonitor
	reads *readQueue
	pub   *publisher
	cov   *coverage
	lanes laneSet
	// failing: the watches whose last request failed.
	failing int
	out     chan watchAnswer
	ctx     context.Context
	wg      *sync.WaitGroup
}

// watchKeep is how long a watched service keeps its watch against a
// service that changed more recently. Changes come in runs (a deploy, a
// scale-up, a node drained), so the service that changed last is the
// likeliest to change next, and a watch should follow it soon; but not at
// once, so that services changing in turn move at most as many watches
// per watchKeep as there are lanes (over HTTP/1.1 each move closes a
// connection and opens another).
const watchKeep = 5 * time.Second

// laneSet is the connections that carry the watches, and how many each
// carries.
type laneSet struct {
	clients []*api.Client
	closers []*http.Transport
	load    []int
	perLane int
	// streams: the most requests one connection has been seen carrying
	// at once since the server showed it allows fewer streams than
	// perLane (see errQueued); 0 until then. Every lane is a connection
	// to the same server, with the same limit, so it is every lane's room.
	streams int
}

// room is how many watches a lane may carry.
func (ls *laneSet) room() int {
	if ls.streams > 0 {
		return ls.streams
	}
	return ls.perLane
}

// watching is how many services are watched.
func (ls *laneSet) watching() int {
	n := 0
	for _, k := range ls.load {
		n += k
	}
	return n
}

// capacity is how many services can be watched at once.
func (ls *laneSet) capacity() int { return len(ls.clients) * ls.room() }

// free returns the first lane with room, or -1. Filling lanes in order
// opens a connection only when the ones before it are full: over HTTP/2,
// 2,000 watches hold 10 connections whatever the budget.
func (ls *laneSet) free() int {
	for i, n := range ls.load {
		if n < ls.room() {
			return i
		}
	}
	return -1
}

// grow adds lanes until there are n. A lane's transport dials its
// connection with its first watch.
func (ls *laneSet) grow(cl *agentClient, n int) error {
	for len(ls.clients) < n {
		c, tr, err := cl.lane()
		if err != nil {
			return err
		}
		ls.clients = append(ls.clients, c)
		ls.closers = append(ls.closers, tr)
		ls.load = append(ls.load, 0)
	}
	return nil
}

// close closes the idle connections of the lanes from the n-th on, and
// forgets those lanes.
func (ls *laneSet) close(n int) {
	for _, tr := range ls.closers[n:] {
		tr.CloseIdleConnections()
	}
	ls.clients, ls.closers, ls.load = ls.clients[:n], ls.closers[:n], ls.load[:n]
}

// facts tells the status about the watches.
func (w *watchSet) facts() watchFacts {
	return watchFacts{watching: w.lanes.watching(), services: w.cat.count(), capacity: w.lanes.capacity(),
		lanes: len(w.lanes.clients), http2: w.lanes.perLane > 1}
}

// adopt offers the services read anew (readQueue.takeFresh) a watch.
func (w *watchSet) adopt(fresh []freshRead) {
	for _, f := range fresh {
		if w.cat.find(f.st.key) == f.st {
			w.maybe(f.st, f.changed)
		}
	}
}

// maybe starts a watch of st, read before, when a lane has room, or when
// the service just changed and a watched service has gone longer than
// watchKeep without a change (it gives up its watch).
func (w *watchSet) maybe(st *svcState, changed bool) {
	if st.watch != nil || w.lanes.capacity() == 0 || !st.seen.fetched {
		return
	}
	lane := w.lanes.free()
	if lane < 0 {
		if !changed {
			return
		}
		victim := w.stalest(time.Now().Add(-watchKeep))
		if victim == nil {
			return
		}
		w.stop(victim)
		if lane = w.lanes.free(); lane < 0 {
			return
		}
	}
	ctx, cancel := context.WithCancel(w.ctx)
	run := &watchRun{lane: lane, cancel: cancel, verify: w.cl.gen.resets() > 0}
	st.watch = run
	w.lanes.load[lane]++
	k, c, dc, index := st.key, w.lanes.clients[lane], w.cat[st.key.dc].name, st.seen.index
	w.wg.Go(func() { run.run(ctx, w.cl, c, k, dc, index, w.out) })
	w.agent.log.Debug("watching service", "service", k.name, "datacenter", dc, "index", index, "lane", lane)
	w.cov.changed()
}

// stalest returns the watched service whose last change is the oldest, if
// older than before, else nil.
func (w *watchSet) stalest(before time.Time) *svcState {
	var best *svcState
	w.cat.each(func(st *svcState) {
		if t := st.seen.changedAt; st.watch != nil && t.Before(before) && (best == nil || t.Before(best.seen.changedAt)) {
			best = st
		}
	})
	return best
}

// stop ends st's watch, if any: its goroutine ends, and its lane has room
// for another.
func (w *watchSet) stop(st *svcState) {
	run := st.watch
	if run == nil {
		return
	}
	run.cancel()
	// Its next peek compares with what the watch applied last, not with
	// what a peek saw before the watch.
	st.seen.peekIndex = 0
	w.agent.log.Debug("no longer watching service", "service", st.key.name, "datacenter", w.cat[st.key.dc].name)
	w.lanes.load[run.lane]--
	w.setFailed(run, false)
	st.watch = nil
	w.cov.changed()
}

// restart starts st's watch again from index 0, after a reset.
func (w *watchSet) restart(st *svcState) {
	w.stop(st)
	w.maybe(st, false)
}

// resize grows or shrinks the lanes to n (a new connection plan). The
// watches of the lanes that go end: their services are followed like any
// unwatched one, and the services without a watch take the room that
// appeared.
func (w *watchSet) resize(n int) error {
	if n < len(w.lanes.clients) {
		w.cat.each(func(st *svcState) {
			if st.watch != nil && st.watch.lane >= n {
				w.stop(st)
			}
		})
		w.lanes.close(n)
	}
	err := w.lanes.grow(w.cl, n)
	w.cat.inOrder(func(st *svcState) { w.maybe(st, false) })
	w.cov.changed()
	return err
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

// done takes an answer of a watch, or its failure.
func (w *watchSet) done(r watchAnswer) {
	st := w.cat.find(r.key)
	if st == nil || st.watch != r.run {
		return // stopped meanwhile
	}
	run := st.watch
	if errors.Is(r.err, errQueued) {
		// The server allows fewer streams per connection than
		// watches_per_connection: the lane keeps the watches that got a
		// stream, and the service goes to the next lane with room (or is
		// followed like any unwatched one). The lane's requests holding a
		// stream are at most the server's limit, and as many once the
		// lane is full; a busy host may not have written some of them
		// yet, so every lane's room is the most seen, raised by any later
		// sighting.
		if n := w.sentOn(run.lane); n > w.lanes.streams {
			if w.lanes.streams == 0 {
				w.agent.log.Warn("the agent allows fewer HTTP/2 streams per connection than watches_per_connection; watching fewer services on each connection",
					"watches_per_connection", w.lanes.perLane, "streams", n)
			}
			w.lanes.streams = n
		}
		w.stop(st)
		w.maybe(st, false)
		return
	}
	if r.err != nil {
		w.setFailed(run, true)
		w.agent.fail(r.err)
		return
	}
	w.setFailed(run, false)
	if w.agent.answered() || !w.reads.accept(st, r.meta.LastIndex) {
		return
	}
	w.pub.serveAnswer(st, r.entries, r.meta)
}

// sentOn counts the watches of lane whose requests hold a stream now (at
// least 1).
func (w *watchSet) sentOn(lane int) int {
	n := 0
	w.cat.each(func(st *svcState) {
		if run := st.watch; run != nil && run.lane == lane && run.sent.Load() {
			n++
		}
	})
	return max(1, n)
}
