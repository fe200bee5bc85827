package consul

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/hashicorp/consul/api"

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
	// flog logs the failing periods of the agent.
	flog *sources.FailureLog

	// Set by Run: the token sent with each request, the generation every
	// read runs under, and the gate the blocking queries and watches wait
	// at while the agent is down (see monitor.go).
	tok  *token
	gen  *generation
	gate *gate
	// proto is the HTTP major version of the agent's last answer on the
	// main client (2: requests are multiplexed).
	proto atomic.Int32
	// plan is how the connections are spent (conns.go); mainReads the
	// reads the main client's connections allow over HTTP/1.1.
	plan      connPlan
	mainReads int
	// census, per datacenter: the loop has services there without a
	// watch, so the catalog query takes censuses (census.go).
	census []atomic.Bool

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
	return &Source{cfg: cfg, name: tmpl, log: opts.Logger, status: opts.Status,
		flog: &sources.FailureLog{Log: opts.Logger, FailingMsg: msgFailing, RecoveredMsg: msgRecovered}}, nil
}

// Run watches Consul until ctx ends; see sources.Source.
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	if s.cfg.ResyncGrace != nil {
		s.log.Warn("resync_grace " + errResyncGrace.Error())
	}
	s.tok = newToken(s.cfg)
	if _, err := s.tok.reload(); err != nil {
		s.failed(err)
		return err
	}
	// One connection until the agent said what it allows and which
	// protocol it speaks.
	c, tr, err := s.newClient(1)
	if err != nil {
		s.failed(err)
		return err
	}
	defer func() { tr.CloseIdleConnections() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.gen, s.gate = newGeneration(ctx), newGate()
	dcs, self, err := s.discover(ctx, c)
	if err != nil {
		return ctx.Err()
	}
	// Over HTTPS, learn whether the agent speaks HTTP/2 (/v1/agent/self
	// may have been refused) before anything runs concurrently.
	if s.cfg.Scheme == "https" && s.proto.Load() == 0 {
		if err := s.untilAnswer(ctx, func(ctx context.Context) error {
			return s.request(ctx, false, func(rctx context.Context) error {
				_, err := c.Status().LeaderWithQueryOptions(s.queryOptions(rctx, dcs[0]))
				return err
			})
		}); err != nil {
			return ctx.Err()
		}
	}
	s.plan = s.cfg.plan(s.proto.Load() == 2, self.maxConnsPerClient)
	s.mainReads = s.plan.reads
	s.logPlan()
	if !s.plan.http2 {
		// Over HTTP/2 everything but the watches shares the one
		// connection; over HTTP/1.1 each request in flight needs its own.
		tr.CloseIdleConnections()
		if c, tr, err = s.newClient(s.plan.mainConns(len(dcs))); err != nil {
			s.failed(err)
			return err
		}
	}
	w := newWatchSet()
	defer w.close()
	if err := s.setupLanes(w); err != nil {
		s.failed(err)
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	polls := make(chan pollResult)
	s.census = make([]atomic.Bool, len(dcs))
	for i, dc := range dcs {
		for _, k := range []pollKind{pollServices, pollChecks, pollNodes} {
			wg.Go(func() { s.poll(ctx, c, i, dc, k, polls) })
		}
	}
	l := newLoop(ctx, s, c, w, dcs, &wg)
	l.agent.nodeID = self.nodeID
	probes := make(chan probeResult)
	wg.Go(func() { s.probe(ctx, c, dcs[0], l.kick, probes) })
	return l.run(ctx, polls, probes, up)
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
func (s *Source) untilAnswer(ctx context.Context, ask func(ctx context.Context) error) error {
	bo := sources.Backoff{Min: s.cfg.RetryMin, Max: min(s.cfg.RetryMax, startupRetryMax)}
	for {
		err := ask(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.failed(err)
		if statusCode(err) == http.StatusForbidden {
			_, _ = s.tok.reload()
		}
		if !sleep(ctx, bo.Next()) {
			return ctx.Err()
		}
	}
}

// Log messages of the state changes (tests look for them).
const (
	msgFailing   = "consul read failed; serving the last good state until it recovers"
	msgRecovered = "consul reads recovered; resynced"
	msgReset     = "consul lost its state and is filling up again; the removal guard keeps the last good state until the refill settles"
)

// failed records a failure: the status turns stale, and the failure log
// says so when a failing period starts (and once a minute while it lasts).
func (s *Source) failed(err error) {
	s.status.Failed(err)
	s.flog.Failed(err)
}

// recovered records that nothing fails: the status is fresh, and the
// failure log says when a failing period ended.
func (s *Source) recovered() {
	s.flog.Recovered()
	s.status.Succeeded()
}

// read reads one service's instances: non-blocking when index is 0 (from
// the agent cache when cached), else a blocking query that answers once
// the service's index passes index or the wait ends.
func (s *Source) read(ctx context.Context, c *api.Client, dc, service string, cached bool, index uint64) ([]*api.ServiceEntry, *api.QueryMeta, error) {
	var entries []*api.ServiceEntry
	var meta *api.QueryMeta
	err := s.request(ctx, index > 0, func(rctx context.Context) error {
		q := s.queryOptions(rctx, dc)
		q.UseCache = cached
		q.Filter = s.cfg.Filter
		if index > 0 {
			q.WaitIndex, q.WaitTime = index, s.cfg.Wait
		}
		var err error
		meta, err = s.boundedStale(q, func(q *api.QueryOptions) (*api.QueryMeta, error) {
			var m *api.QueryMeta
			var err error
			entries, m, err = c.Health().ServiceMultipleTags(service, s.cfg.Tags, false, q)
			return m, err
		})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading health of service %q in %s: %w", service, dc, err)
	}
	return entries, meta, nil
}
