package consul

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// Probing. Reads alone cannot tell a hung agent from an idle one (an idle
// source holds only blocking queries, which may rightly stay silent for
// wait), nor notice quickly that a failing agent answers again (a read in
// backoff waits up to retry_max). So one goroutine asks the agent for
// /v1/status/leader, a tiny answer that needs no ACL: every half
// read_timeout while the source is healthy, so that a hang is seen within
// 1.5 times read_timeout,
// and every probeFailingInterval while it fails, so that the recovery is
// seen within a second.
const (
	probeFailingInterval = 200 * time.Millisecond
	// probeFailingTimeout bounds a probe while the source already fails:
	// a probe caught on a connection the agent never answers must not
	// delay noticing that it answers new ones.
	probeFailingTimeout = 500 * time.Millisecond
)

// identifyEvery: every this many rounds the probe also reads the agent's
// node ID, so that an agent replaced without any request failing (a
// restart quick enough for Go's transport to retry the cut requests on
// the new agent, or another agent behind the address) is noticed within
// identifyEvery rounds (30s with the default read_timeout).
const identifyEvery = 12

// probeResult is the outcome of one probe: err is nil when the agent
// answered with a leader; nodeID is the agent's node ID when the probe
// read it (see reset.go), else empty.
type probeResult struct {
	err    error
	nodeID string
}

// probe runs until ctx ends. failing is read at each round: the loop sets
// it; kick asks for a probe now (the loop just saw a request fail without
// an HTTP answer). The first good probe after a kick or a failed probe,
// and every identifyEvery-th, also reads the agent's node ID: a request
// cut short may mean the agent restarted.
func (s *Source) probe(ctx context.Context, c *api.Client, dc string, failing func() bool, kick <-chan struct{}, out chan<- probeResult) {
	t := time.NewTimer(s.cfg.ReadTimeout / 2)
	defer t.Stop()
	identify, rounds := false, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			identify = true
		case <-t.C:
		}
		if rounds++; rounds%identifyEvery == 0 {
			identify = true
		}
		limit, every := s.cfg.ReadTimeout, s.cfg.ReadTimeout/2
		if failing() {
			limit, every = min(limit, probeFailingTimeout), probeFailingInterval
		}
		r := probeResult{err: s.probeOnce(ctx, c, dc, limit)}
		switch {
		case r.err != nil:
			identify = true
		case identify:
			a, err := s.agentSelf(ctx, c)
			r.nodeID = a.nodeID
			identify = err != nil && statusCode(err) == 0
		}
		if ctx.Err() != nil || !send(ctx, out, r) {
			return
		}
		t.Reset(every)
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

// generation is the context every read and blocking query runs under,
// renewed when the source learns that what failed may now work (the agent
// answers a probe again, the token changed): renewing cancels requests
// stuck on connections of the failed period and ends every backoff wait,
// so that everything is asked again at once.
type generation struct {
	parent context.Context

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	// resets counts the renewals after which blocking queries start over
	// from index 0 (restart): Consul lost its state, and a query blocked
	// on an index of the old state could wait out its whole wait.
	resets uint64
}

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

// restart renews the generation and has every blocking query start over
// from index 0.
func (g *generation) restart() {
	g.mu.Lock()
	g.resets++
	g.mu.Unlock()
	g.renew()
}

// resetCount is the number of restarts so far.
func (g *generation) resetCount() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.resets
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
