package consul

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"text/template"

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

	// Test seams: dial replaces the transport's dialer (to count
	// connections), wrap wraps the round tripper (to see responses).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	wrap func(http.RoundTripper) http.RoundTripper
}

// New decodes and validates a source's configuration. It does no I/O (the
// token file is read by Run).
func New(raw map[string]any, opts sources.Options) (*Source, error) {
	var cfg Config
	if err := sources.Decode(raw, &cfg); err != nil {
		return nil, err
	}
	cfg.defaults()
	tmpl, err := cfg.validate(opts.BaseDir)
	if err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	return &Source{cfg: cfg, name: tmpl, log: opts.Logger, status: opts.Status}, nil
}

// Run watches Consul until ctx ends; see sources.Source.
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	c, tr, err := s.newClient()
	if err != nil {
		s.failed(err)
		return err
	}
	defer tr.CloseIdleConnections()
	dcs, err := s.datacenters(ctx, c)
	if err != nil {
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	polls := make(chan pollResult)
	for i, dc := range dcs {
		for _, k := range []pollKind{pollServices, pollChecks, pollNodes} {
			wg.Go(func() { s.poll(ctx, c, i, dc, k, polls) })
		}
	}
	l := newLoop(s, c, dcs, &wg)
	return l.run(ctx, polls, up)
}

// datacenters returns the configured datacenters, or asks the agent for its
// own, retrying with backoff until it answers or ctx ends.
func (s *Source) datacenters(ctx context.Context, c *api.Client) ([]string, error) {
	if len(s.cfg.Datacenters) > 0 {
		return s.cfg.Datacenters, nil
	}
	bo := backoff{min: s.cfg.RetryMin, max: s.cfg.RetryMax}
	for {
		dc, err := agentDatacenter(c)
		if err == nil {
			return []string{dc}, nil
		}
		s.failed(err)
		if !sleep(ctx, bo.next()) {
			return nil, ctx.Err()
		}
	}
}

// Log messages of the state changes (tests look for them).
const (
	msgFailing   = "consul read failed; serving the last good state until it recovers"
	msgRecovered = "consul reads recovered; resynced"
)

// failed records a failure, logging only when it starts a failing period.
func (s *Source) failed(err error) {
	if s.status.Failed(err) {
		s.log.Warn(msgFailing, "err", err)
	}
}

// fetch reads one service's instances (non-blocking), from the agent cache
// when cached.
func (s *Source) fetch(ctx context.Context, c *api.Client, dc, service string, cached bool) ([]*api.ServiceEntry, uint64, error) {
	q := s.queryOptions(ctx, dc)
	q.UseCache = cached
	q.Filter = s.cfg.Filter
	entries, meta, err := c.Health().ServiceMultipleTags(service, s.cfg.Tags, false, q)
	if err != nil {
		return nil, 0, fmt.Errorf("reading health of service %q in %s: %w", service, dc, err)
	}
	return entries, meta.LastIndex, nil
}
