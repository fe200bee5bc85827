package consul

import (
	"context"
	"errors"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// watchRun is one service's watch, held by its record (svcState.watch):
// the goroutine of its blocking query (run), and what the watch set keeps
// of it.
type watchRun struct {
	lane   int
	cancel context.CancelFunc
	// sent: the watch's current request holds a stream (its latest
	// attempt wrote its headers); the watch set counts these when the
	// agent shows its stream limit (errQueued).
	sent atomic.Bool
	// failed: its last request failed (the source is stale until it
	// answers again).
	failed bool
	// verify: the watch started after a reset, and checks its answers
	// against the servers until one agrees (verifyWatched).
	verify bool
}

// watchAnswer is one answer of a watch, or its failure.
type watchAnswer struct {
	key     svcKey
	run     *watchRun
	entries []*api.ServiceEntry
	meta    *api.QueryMeta
	err     error
}

// run runs the blocking query of one watched service until ctx ends,
// sending every answer whose index moved (and every failure) to out.
// Answers that only end the wait are not sent: the probe, not the
// watches, tells a hung agent from a quiet one. An index that went
// backwards is sent (the read queue reads the service again) and blocked on
// from there.
func (w *watchRun) run(ctx context.Context, cl *agentClient, c *api.Client, k svcKey, dc string, index uint64, out chan<- watchAnswer) {
	bo := sources.Backoff{Min: cl.cfg.RetryMin, Max: cl.cfg.RetryMax}
	var started time.Time
	verify := w.verify
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
		if !cl.gate.wait(ctx) {
			return
		}
		started = time.Now()
		entries, meta, queued, err := w.read(ctx, cl, c, dc, k.name, index)
		ahead := false
		if err == nil && verify && index > 0 && meta.LastIndex != index {
			if entries, meta, ahead, err = verifyWatched(ctx, cl, c, dc, k.name, entries, meta); err == nil && !ahead {
				verify = false
			}
		}
		if ctx.Err() != nil {
			return
		}
		if queued {
			send(ctx, out, watchAnswer{key: k, run: w, err: errQueued})
			return
		}
		if errors.Is(err, errRenewed) {
			bo.Reset()
			continue
		}
		if err != nil {
			index = 0
			if !send(ctx, out, watchAnswer{key: k, run: w, err: err}) || !cl.gen.pause(ctx, bo.Next()) {
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
		if !send(ctx, out, watchAnswer{key: k, run: w, entries: entries, meta: meta}) {
			return
		}
		if ahead && !cl.gen.pause(ctx, bo.Next()) {
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
func verifyWatched(ctx context.Context, cl *agentClient, c *api.Client, dc, service string, entries []*api.ServiceEntry, meta *api.QueryMeta) ([]*api.ServiceEntry, *api.QueryMeta, bool, error) {
	fresh, fmeta, err := cl.read(ctx, c, dc, service, false, 0)
	switch {
	case err != nil:
		return nil, nil, false, err
	case fmeta.LastIndex < meta.LastIndex:
		cl.log.Debug("the agent's view of a service is ahead of the servers after a reset; reading from the servers until it catches up",
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

// read is a read for the watch, which also reports whether the request
// waited streamWaitFactor read_timeouts without being sent. Over HTTP/2 a
// lane's requests beyond the server's stream limit wait for a stream (the
// transport is strict); a watch waiting so would watch nothing until
// another ends, possibly minutes later, while its service counted as
// watched and was not swept. w.sent says whether the request holds a
// stream.
func (w *watchRun) read(ctx context.Context, cl *agentClient, c *api.Client, dc, service string, index uint64) ([]*api.ServiceEntry, *api.QueryMeta, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each attempt of the request starts with GotConn: the transport
	// retries a request whose stream the server refused, which happens
	// to requests sent on a new connection before its stream limit was
	// known (the server's settings had not arrived). Such a request wrote
	// its headers once and now waits for a stream, so "sent" is the state
	// of the latest attempt, not of the first.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { w.sent.Store(false) },
		WroteHeaders: func() { w.sent.Store(true) },
	})
	var queued atomic.Bool
	t := time.AfterFunc(streamWaitFactor*cl.cfg.ReadTimeout, func() {
		if !w.sent.Load() {
			queued.Store(true)
			cancel()
		}
	})
	entries, meta, err := cl.read(ctx, c, dc, service, false, index)
	t.Stop()
	return entries, meta, queued.Load(), err
}
