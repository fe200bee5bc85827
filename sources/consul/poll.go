package consul

import (
	"context"
	"time"

	"github.com/hashicorp/consul/api"
)

// pollKind names the three blocking queries held per datacenter.
type pollKind uint8

const (
	pollServices pollKind = iota // /v1/catalog/services: names and tags
	pollChecks                   // /v1/health/state/any: checks not passing
	pollNodes                    // /v1/catalog/nodes: addresses and meta
)

func (k pollKind) String() string {
	return [...]string{"catalog services", "health state", "catalog nodes"}[k]
}

// pollResult is one answer (or failure) of a blocking query.
type pollResult struct {
	dc       int
	kind     pollKind
	index    uint64
	services map[string][]string
	checks   api.HealthChecks
	nodes    []*api.Node
	err      error
	// unchanged: the wait ended without a change. It carries no data but
	// tells the loop the agent still answers (fresh Status.LastSuccess).
	unchanged bool
	// reset: the index went backwards (a restored or restarted cluster).
	reset bool
}

// minPollInterval paces a blocking query whose index keeps moving: under
// heavy churn each answer of /v1/health/state/any carries every check, so
// the source asks at most this often.
const minPollInterval = 50 * time.Millisecond

// poll runs one blocking query loop until ctx ends, sending every answer
// whose index moved (and every failure) to out. It follows Consul's rules
// for blocking queries: an unchanged index means the wait timed out (ask
// again; only a heartbeat is reported); an index that went backwards means the state
// was reset (ask again from 0); an index of 0 is treated as 1 so that the
// loop never spins; after an error the index restarts from 0 because the
// agent may have come back with a fresh state.
func (s *Source) poll(ctx context.Context, c *api.Client, dc int, dcName string, kind pollKind, out chan<- pollResult) {
	var index uint64
	bo := backoff{min: s.cfg.RetryMin, max: s.cfg.RetryMax}
	var last time.Time
	for {
		if wait := time.Until(last.Add(minPollInterval)); wait > 0 {
			if !sleep(ctx, wait) {
				return
			}
		}
		last = time.Now()
		q := s.queryOptions(ctx, dcName)
		q.WaitIndex = index
		q.WaitTime = s.cfg.Wait
		res := pollResult{dc: dc, kind: kind}
		var meta *api.QueryMeta
		switch kind {
		case pollServices:
			res.services, meta, res.err = c.Catalog().Services(q)
		case pollChecks:
			// Only checks that are not passing: the answer stays small in
			// a healthy cluster while its index still moves on every
			// check change; a check missing from it is passing (or gone,
			// which for a passing check changes no aggregate).
			q.Filter = `Status != "passing"`
			res.checks, meta, res.err = c.Health().State(api.HealthAny, q)
		case pollNodes:
			res.nodes, meta, res.err = c.Catalog().Nodes(q)
		}
		if ctx.Err() != nil {
			return
		}
		if res.err != nil {
			index = 0
			if !send(ctx, out, res) || !sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		bo.reset()
		res.index = max(meta.LastIndex, 1)
		switch {
		case res.index == index:
			if !send(ctx, out, pollResult{dc: dc, kind: kind, index: index, unchanged: true}) {
				return
			}
			continue
		case res.index < index:
			index = 0 // reset: the next read does not block
			res.reset = true
		default:
			index = res.index
		}
		if !send(ctx, out, res) {
			return
		}
	}
}

func send[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
