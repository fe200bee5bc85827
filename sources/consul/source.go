package consul

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// TypeName is the `type` of consul sources in the configuration.
const TypeName = "consul"

func init() {
	sources.Register(sources.Type{Name: TypeName, New: func(cfg map[string]any, opts sources.Options) (sources.Source, error) {
		return New(cfg, opts)
	}})
}

var _ sources.Source = (*Source)(nil)

// Source watches a Consul catalog; see the package documentation.
type Source struct {
	cfg    Config
	name   *template.Template
	log    *slog.Logger
	status *sources.Status

	// Set by Run: plan is how the connections are spent (conns.go),
	// mainReads the most reads the main client's connections allow over
	// HTTP/1.1; census, per datacenter: it has services without a watch,
	// so the catalog query takes censuses (sweeper).
	plan      connPlan
	mainReads int
	census    []atomic.Bool

	// budgets is the register of shared connection budgets the source
	// joins (budget.go): the process's.
	budgets *agentBudgets

	// Test seams: dial replaces the transport's dialer (to count
	// connections), wrap wraps the round tripper (to see responses).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	wrap func(http.RoundTripper) http.RoundTripper
}

// New decodes and validates a source's configuration. It does no I/O (the
// token file is read by Run).
func New(raw map[string]any, opts sources.Options) (*Source, error) {
	cfg, tmpl, err := newConfig(raw, opts.BaseDir)
	if err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	return &Source{cfg: cfg, name: tmpl, log: opts.Logger, status: opts.Status, budgets: budgets}, nil
}

// Run watches Consul until ctx ends; see sources.Source.
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	if s.cfg.ResyncGrace != nil {
		s.log.Warn("resync_grace " + errResyncGrace.Error())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The source joins its agent's budget before its first connection,
	// and leaves it when it stops: the connections it closes on the way
	// out are uncounted as they close.
	share := s.budgets.join(s.cfg.agentKey(), s.cfg.floorConns())
	defer share.leave()
	cl := &agentClient{cfg: &s.cfg, log: s.log, tok: newToken(s.cfg.Token, s.cfg.TokenFile), gen: newGeneration(ctx), gate: newGate(), dial: s.dial, wrap: s.wrap,
		conns: share, life: ctx}
	agent := newAgentMonitor(cl, s.log, s.status)
	if _, err := cl.tok.reload(); err != nil {
		agent.fail(err)
		return err
	}
	// One connection until the agent said what it allows and which
	// protocol it speaks.
	c, _, err := cl.main(1)
	if err != nil {
		agent.fail(err)
		return err
	}
	defer func() { cl.mainTr.CloseIdleConnections() }()
	dcs, self, err := s.discover(ctx, cl, agent)
	if err != nil {
		return ctx.Err()
	}
	agent.nodeID = self.nodeID
	// Over HTTPS, learn whether the agent speaks HTTP/2 (/v1/agent/self
	// may have been refused) before anything runs concurrently.
	if s.cfg.Scheme == "https" && cl.proto.Load() == 0 {
		if err := s.untilAnswer(ctx, cl, agent, func(ctx context.Context) error { return cl.leader(ctx, c, dcs[0]) }); err != nil {
			return ctx.Err()
		}
	}
	http2 := cl.proto.Load() == 2
	want, _ := s.cfg.alone(self.maxConnsPerClient)
	share.setWant(want)
	s.plan = s.cfg.planShare(http2, self.maxConnsPerClient, share.current())
	s.logPlan()
	if !http2 {
		// Over HTTP/2 everything but the watches shares the one
		// connection; over HTTP/1.1 each request in flight needs its own.
		// The main client allows the connections of the source alone, so
		// that a share that grows later lets more reads run; the reads in
		// flight are the plan's (readQueue.slots).
		alone := s.cfg.plan(false, self.maxConnsPerClient)
		s.mainReads = alone.reads
		cl.mainTr.CloseIdleConnections()
		if c, _, err = cl.main(alone.mainConns(len(dcs))); err != nil {
			agent.fail(err)
			return err
		}
	}
	var wg sync.WaitGroup
	l, ev := s.assemble(ctx, cl, agent, dcs, &wg)
	defer l.watches.lanes.close(0)
	if err := l.watches.lanes.grow(cl, s.plan.lanes); err != nil {
		agent.fail(err)
		return err
	}
	defer wg.Wait()
	defer cancel()
	polls := make(chan pollResult)
	for i, dc := range dcs {
		for _, k := range []pollKind{pollServices, pollChecks, pollNodes} {
			p := newPoller(cl, i, dc, k, &s.census[i], polls)
			wg.Go(func() { p.run(ctx) })
		}
	}
	probes := make(chan probeResult)
	wg.Go(func() { agent.probe(ctx, c, dcs[0], probes) })
	ev.polls, ev.probes, ev.budget = polls, probes, share.changed
	return l.run(ctx, ev, up)
}

// assemble builds the parts of a running source and the loop that drives
// them.
func (s *Source) assemble(ctx context.Context, cl *agentClient, agent *agentMonitor, dcs []string, wg *sync.WaitGroup) (*loop, events) {
	reads, watches := make(chan fetchResult), make(chan watchAnswer)
	s.census = make([]atomic.Bool, len(dcs))
	cat := newCatalog(&s.cfg, dcs)
	cov := &coverage{log: s.log, status: s.status}
	pub := newPublisher(cat, &s.cfg, s.log, s.status, agent)
	q := newReadQueue(cat, cl, agent, pub, s.plan.reads, reads, wg)
	w := &watchSet{cat: cat, cl: cl, agent: agent, reads: q, pub: pub, cov: cov, out: watches, ctx: ctx, wg: wg,
		lanes: laneSet{perLane: s.plan.perLane}}
	sw := newSweeper(cat, q, &s.cfg, cov, s.census)
	sig := &signals{cat: cat, cfg: &s.cfg, name: s.name, log: s.log, acl: pub.acl, reads: q, watches: w, sweeps: sw, pub: pub}
	l := &loop{s: s, cl: cl, agent: agent, cat: cat, sig: sig, reads: q, watches: w, sweeps: sw, pub: pub, cov: cov}
	return l, events{reads: reads, watches: watches}
}

// startupRetryMax bounds the backoff while the agent's datacenter is not
// known yet: nothing is served before it is, so a returning agent must be
// noticed within a second.
const startupRetryMax = time.Second

// untilAnswer runs ask, a startup request, until it succeeds or ctx ends,
// with backoff capped at startupRetryMax. Each request of ask has the
// deadline of a non-blocking read (ask runs it through request), so a
// hung agent is a logged failure, not a silent wait; a 403 reads
// token_file again.
func (s *Source) untilAnswer(ctx context.Context, cl *agentClient, agent *agentMonitor, ask func(ctx context.Context) error) error {
	bo := sources.Backoff{Min: s.cfg.RetryMin, Max: min(s.cfg.RetryMax, startupRetryMax)}
	for {
		err := ask(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		agent.fail(err)
		if statusCode(err) == http.StatusForbidden {
			_, _ = cl.tok.reload()
		}
		if !sleep(ctx, bo.Next()) {
			return ctx.Err()
		}
	}
}

// discover asks the agent about itself (see untilAnswer) and returns the
// datacenters to watch: the configured ones, else the agent's own, else
// (a token without agent:read) the nearest of the catalog.
func (s *Source) discover(ctx context.Context, cl *agentClient, agent *agentMonitor) ([]string, agentInfo, error) {
	var info agentInfo
	var dcs []string
	err := s.untilAnswer(ctx, cl, agent, func(ctx context.Context) error {
		var err error
		if info, err = cl.self(ctx, cl.c); err != nil {
			return err
		}
		switch {
		case len(s.cfg.Datacenters) > 0:
			dcs = s.cfg.Datacenters
		case info.datacenter != "":
			dcs = []string{info.datacenter}
		default:
			all, err := cl.datacenters(ctx, cl.c)
			if err != nil {
				return fmt.Errorf("finding the agent's datacenter: %w", err)
			}
			if len(all) == 0 {
				return errors.New("finding the agent's datacenter: catalog lists none")
			}
			dcs = all[:1]
		}
		return nil
	})
	return dcs, info, err
}
