// Package dns is the `type: dns` source: services discovered through DNS
// SRV records (RFC 2782) or A/AAAA records of host names, refreshed when
// their TTLs expire.
//
// SRV priorities become endpoint priorities (made contiguous from 0), SRV
// weights become load-balancing weights (see srvWeights for the mapping of
// weight 0), ports come from the records. Like Prometheus' dns_sd, the
// source tells three outcomes apart: an answer updates the service; an
// NXDOMAIN or NODATA answer empties it (a real change); a server failure,
// timeout or malformed response publishes nothing, so the last good state
// stays served, and is recorded in the source's Status.
//
// A name that had endpoints and is answered empty is not reported alone:
// the source first looks up every other name that has endpoints once
// more, at once, and reports all the outcomes as one update (confirm.go).
// Each name expires on its own TTL, so a resolver that lost a whole zone
// would otherwise empty the source one name at a time, each update too
// small for the removal guard to hold; confirmed, it is one update that
// empties the source (or darkens most of it), which the guard holds,
// while one name gone among many still applies at once, one round of
// queries later. Rounds start at most once per refresh.min.
package dns

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

func init() {
	sources.Register(sources.Type{Name: "dns", New: New})
}

var _ sources.Source = (*Source)(nil)

// Source polls the configured names. Create it with New.
type Source struct {
	cfg     Config
	entries []entry
	servers []string
	family  Family
	log     *slog.Logger
	status  *sources.Status
	// after is the timer that refreshes and retries wait on (time.After):
	// the one seam through which tests see the schedule the source asks
	// for, without waiting it out on a real clock.
	after func(time.Duration) <-chan time.Time
}

// New decodes and validates cfg. It does no I/O: the system resolver
// configuration is read when Run starts.
func New(cfg map[string]any, opts sources.Options) (sources.Source, error) {
	c := defaults()
	if err := settings.Decode(cfg, &c); err != nil {
		return nil, err
	}
	entries, servers, fam, err := c.validate()
	if err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	return &Source{cfg: c, entries: entries, servers: servers, family: fam, log: opts.Logger, status: opts.Status,
		after: time.After}, nil
}

// outcome is the result of one lookup of entry i, begun at at, by the
// entry's own refresh (round 0) or by a confirmation round.
type outcome struct {
	i     int
	res   Result
	err   error
	at    time.Time
	round int
}

// Run resolves every entry on its own schedule and reports the services:
// one Full update once every entry has been resolved (answered or
// authoritatively empty), then a partial update carrying the services
// whose endpoints changed; a service that lost its last endpoints comes
// with the outcomes of a confirmation round. It returns ctx.Err() when ctx
// is done, or an error when the system resolver configuration cannot be
// read.
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	r, err := s.resolver()
	if err != nil {
		return err // the manager records it and restarts the source
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	results := make(chan outcome)
	for i, e := range s.entries {
		wg.Go(func() { s.poll(ctx, r, i, e, results) })
	}
	return s.merge(ctx, r, results, up)
}

func (s *Source) resolver() (*resolver, error) {
	r := &resolver{
		servers:   s.servers,
		udp:       &mdns.Client{Net: "udp", UDPSize: uint16(s.cfg.EDNSBuffer), Timeout: s.cfg.Timeout},
		tcp:       &mdns.Client{Net: "tcp", Timeout: s.cfg.Timeout},
		ednsSize:  uint16(s.cfg.EDNSBuffer),
		transport: s.cfg.Transport,
		attempts:  s.cfg.Attempts,
	}
	if len(r.servers) > 0 {
		return r, nil
	}
	sys, err := loadSystem(s.cfg.ResolvConf, s.log)
	if err != nil {
		return nil, err
	}
	r.system = sys
	return r, nil
}

// poll looks entry e up, reports the outcome, and waits for the next
// refresh, until ctx is done.
func (s *Source) poll(ctx context.Context, r *resolver, i int, e entry, out chan<- outcome) {
	bo := sources.Backoff{Min: s.cfg.Refresh.Min, Max: s.cfg.Refresh.Max}
	for {
		at := time.Now()
		res, err := lookup(ctx, r, e, s.family)
		if ctx.Err() != nil {
			return
		}
		select {
		case out <- outcome{i: i, res: res, err: err, at: at}:
		case <-ctx.Done():
			return
		}
		var d time.Duration
		if err != nil {
			d = bo.Next()
		} else {
			bo.Reset()
			d = s.refreshDelay(res.TTL)
		}
		// An abandoned time.After timer is collected (Go 1.23 and later),
		// so leaving on ctx.Done needs no Stop.
		select {
		case <-s.after(d):
		case <-ctx.Done():
			return
		}
	}
}

// refreshDelay is the fixed interval, or the TTL clamped to [min, max];
// jitter shortens it by up to that fraction, so a refresh never happens
// after the records expired.
func (s *Source) refreshDelay(ttl time.Duration) time.Duration {
	r := s.cfg.Refresh
	d := r.Interval
	if d == 0 {
		d = min(max(ttl, r.Min), r.Max)
	}
	return shorten(d, r.Jitter)
}

func shorten(d time.Duration, jitter float64) time.Duration {
	if j := time.Duration(float64(d) * jitter); j > 0 {
		d -= rand.N(j) //nolint:gosec // jitter spreads refreshes; nothing depends on it being unpredictable
	}
	return d
}
