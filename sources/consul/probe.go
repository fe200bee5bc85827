package consul

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// The agent monitor. Reads alone cannot tell a hung agent from an idle one
// (an idle source holds only blocking queries, which may rightly stay
// silent for wait), nor notice quickly that a failing agent answers again.
// So one goroutine probes the agent with /v1/status/leader, a tiny answer
// that needs no ACL: every half read_timeout while it answers, so that a
// hang is seen within 1.5 read_timeout, and while it fails with a backoff of
// its own (probeRetryMin doubling to probeRetryMax, jittered), so that an
// agent that comes back is noticed within about a second however long it
// was away, and an agent that is gone costs about one request a second.
//
// While the probe fails, the probe alone asks: the gate is shut, reads are
// not dispatched, and the blocking queries and the watches wait at the
// gate, whatever their own last error looked like (refused, reset,
// timeout, TLS, an HTTP status). A request that fails without an HTTP
// answer kicks the probe: it probes probeRetryMin after its previous probe
// rather than at the end of its healthy wait, and reads the agent's
// identity. A kick shortens that one wait; while the probe fails, its
// backoff sets the pace and kicks change nothing, so no failure can make
// the probe (or anything it gates) ask in a loop.
const (
	probeRetryMin = 200 * time.Millisecond
	probeRetryMax = time.Second
	// probeFailingTimeout bounds a probe while the probe already fails:
	// a probe caught on a connection the agent never answers must not
	// delay noticing that it answers new ones.
	probeFailingTimeout = 500 * time.Millisecond
)

// identifyEvery: every this many rounds the probe also reads
// /v1/agent/self, so that an agent replaced without any request failing
// (a restart quick enough for Go's transport to retry the cut requests on
// the new agent, or another agent behind the address) is noticed within
// identifyEvery rounds (30s with the default read_timeout), and so is a
// change of the agent's connection limit.
const identifyEvery = 12

// probeResult is the outcome of one probe: err is nil when the agent
// answered with a leader; gone says that err shows the agent's process
// gone (see wentAway); self is what /v1/agent/self said when the probe
// read it, else nil.
type probeResult struct {
	err  error
	gone bool
	self *agentInfo
}

// probe runs until ctx ends, sending each probe's outcome to out; kick
// asks for a probe soon (see above). The first good probe after a kick or
// a failed probe, and every identifyEvery-th, also reads /v1/agent/self.
func (s *Source) probe(ctx context.Context, c *api.Client, dc string, kick <-chan struct{}, out chan<- probeResult) {
	healthy := s.cfg.ReadTimeout / 2
	bo := sources.Backoff{Min: probeRetryMin, Max: probeRetryMax}
	t := time.NewTimer(healthy)
	defer t.Stop()
	due := time.Now().Add(healthy)
	var last time.Time // when the previous probe ended
	identify, failing, rounds := false, false, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			identify = true
			if at := last.Add(probeRetryMin); !failing && at.Before(due) {
				due = at
				t.Reset(time.Until(at))
			}
			continue
		case <-t.C:
		}
		if rounds++; rounds%identifyEvery == 0 {
			identify = true
		}
		limit := s.cfg.ReadTimeout
		if failing {
			limit = min(limit, probeFailingTimeout)
		}
		r := probeResult{err: s.probeOnce(ctx, c, dc, limit)}
		switch {
		case r.err != nil:
			identify, r.gone = true, wentAway(r.err)
		case identify:
			a, err := s.agentSelf(ctx, c)
			if err == nil {
				r.self = &a
			}
			identify = err != nil && statusCode(err) == 0
		}
		if ctx.Err() != nil || !send(ctx, out, r) {
			return
		}
		last, failing = time.Now(), r.err != nil
		wait := healthy
		if failing {
			wait = bo.Next()
		} else {
			bo.Reset()
		}
		due = last.Add(wait)
		t.Reset(wait)
	}
}

func (s *Source) probeOnce(parent context.Context, c *api.Client, dc string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	leader, err := c.Status().LeaderWithQueryOptions(s.queryOptions(ctx, dc))
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil:
		return fmt.Errorf("probing the agent: no answer to /v1/status/leader within %v", limit)
	case err != nil:
		return fmt.Errorf("probing the agent: %w", err)
	case leader == "":
		return errors.New("probing the agent: no cluster leader")
	}
	return nil
}

// wentAway reports whether err shows that the agent's process is not there
// any more: the connection was refused (or its socket file is gone), or
// cut before an answer. An agent that went away may come back with any
// state; one that only stopped answering (a timeout), presented a
// certificate the source does not trust, or lost its leader is the same
// process with the same state when it answers again.
func wentAway(err error) bool {
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ENOENT, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// gate lets the goroutines that ask the agent wait while the probe finds it
// down: wait returns at once while the gate is open.
type gate struct {
	mu sync.Mutex
	// open is closed while the gate is open; shutting the gate replaces
	// it with a new channel, which opening closes.
	open chan struct{}
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

// wait returns true once the gate is open, false when ctx ended first.
func (g *gate) wait(ctx context.Context) bool {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *gate) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// generation is the context every read and blocking query runs under,
// renewed when the source learns that what failed may now work (the agent
// answers again, the token changed): renewing cuts requests stuck on
// connections of the failed period and ends every backoff wait, so that
// everything is asked again at once. Its marks tell the blocking queries
// where to ask from next (see poll).
type generation struct {
	parent context.Context

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	marks  queryMarks
}

// queryMarks count two kinds of renewal. After a reset (Consul lost its
// state) the blocking queries start over from index 0 and forget the
// indexes they saw: a query blocked on an index of the old state could
// wait out its whole wait. After a resume (the agent answers again after
// an outage, with its state) they ask again from index 0 too, so that no
// query waits on an index the agent will not reach, but compare the
// answer with the index they saw last: an index that went backwards is a
// reset.
type queryMarks struct{ resets, resumes uint64 }

func newGeneration(parent context.Context) *generation {
	g := &generation{parent: parent}
	g.ctx, g.cancel = context.WithCancel(parent)
	return g
}

func (g *generation) current() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx
}

func (g *generation) renew() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cancel()
	g.ctx, g.cancel = context.WithCancel(g.parent)
}

// restart renews the generation after a reset and returns the number of
// resets so far.
func (g *generation) restart() uint64 {
	g.mu.Lock()
	g.marks.resets++
	n := g.marks.resets
	g.mu.Unlock()
	g.renew()
	return n
}

// resume renews the generation after an outage the agent's state
// survived.
func (g *generation) resume() {
	g.mu.Lock()
	g.marks.resumes++
	g.mu.Unlock()
	g.renew()
}

// seen returns the renewals so far.
func (g *generation) seen() queryMarks {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.marks
}

// errRenewed marks a request cut short by a renewed generation: not a
// failure, the request is repeated at once.
var errRenewed = errors.New("request restarted")

// errTimeout marks a request that passed its deadline.
var errTimeout = errors.New("timed out")

// request runs do with the deadline of its kind (see Config.ReadTimeout)
// under the current generation, and names a timeout and a renewal as such.
// The request runs under ctx (a watch that is stopped cuts its query; the
// request carries ctx's values, such as an HTTP trace) and ends with the
// generation too.
func (s *Source) request(ctx context.Context, blocking bool, do func(ctx context.Context) error) error {
	gctx := s.gen.current()
	limit := s.cfg.ReadTimeout
	if blocking {
		limit += s.cfg.Wait + s.cfg.Wait/16
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	defer context.AfterFunc(gctx, cancel)()
	err := do(rctx)
	switch {
	case err == nil, ctx.Err() != nil:
		return err
	case gctx.Err() != nil:
		return errRenewed
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("no answer within %v: %w", limit, errTimeout)
	}
	return err
}

// statusCode returns the HTTP status of a failed request, 0 when it got
// none (connection refused, timeout, malformed answer).
func statusCode(err error) int {
	var se api.StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}
