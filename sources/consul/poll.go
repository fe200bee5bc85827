package consul

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/xdsbridge/xdsbridge/sources"
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
	// onNew names the services of nodes that appeared since the previous
	// answer (pollNodes; see newNodeServices).
	onNew []string
	meta  *api.QueryMeta
	err   error
	// unchanged: the wait ended without a change. It carries no data but
	// tells the loop the agent still answers (fresh Status.LastSuccess).
	unchanged bool
	// reset: the index went backwards (a restored or restarted cluster).
	reset bool
	// census is set on the result of a census (census.go), which carries
	// nothing else.
	census *census
	// epoch: the resets before the request started (loop.epoch).
	epoch uint64
}

// minPollInterval paces a blocking query whose index keeps moving: under
// heavy churn each answer of /v1/health/state/any carries every check, so
// the source asks at most this often.
const minPollInterval = 50 * time.Millisecond

// catalogPollInterval paces /v1/catalog/services further. Its index moves
// on every registration anywhere, and each answer lists every service (a
// few hundred KB at 10,000 services, read by a server): under a churn of
// 20 registrations a second it would answer 20 times a second, most of the
// source's cost to the servers. What it alone tells (a service that
// appears or vanishes; for unwatched services, a reason to sweep) can wait
// this much longer.
const catalogPollInterval = 250 * time.Millisecond

// interval is the pacing of a blocking query of this kind.
func (k pollKind) interval() time.Duration {
	if k == pollServices {
		return catalogPollInterval
	}
	return minPollInterval
}

// poll runs one blocking query loop until ctx ends, sending every answer
// whose index moved (and every failure) to out. It follows Consul's rules
// for blocking queries: an unchanged index means the wait timed out (ask
// again; only a heartbeat is reported); an index that went backwards means
// the state was reset (reported as such); an index of 0 is treated as 1 so
// that the loop never spins. After an error the query restarts from index
// 0, because the agent may have come back with a fresh state whose index
// is lower (a query blocking on the old index would then wait out its
// wait), and the first answer after an error is diffed whatever its index.
// Each request has a deadline of wait + wait/16 + read_timeout. A renewed
// generation (monitor.go) cuts the request or the backoff short and asks
// again at once; after a reset or a resume it asks from index 0 (see
// queryMarks). Nothing is asked while the gate is shut (the probe finds
// the agent down): the probe's backoff, not this query's, paces an
// outage.
func (s *Source) poll(ctx context.Context, c *api.Client, dc int, dcName string, kind pollKind, out chan<- pollResult) {
	var index, last uint64
	// afterErr: the last request failed. The next answer is diffed even
	// at the index seen last: an agent restarted with a fresh state often
	// reaches that very index again (it replays the same registrations)
	// with other contents.
	var afterErr bool
	var known map[string]bool // nodes of the previous answer (pollNodes)
	bo := sources.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax}
	var started time.Time
	marks := s.gen.seen()
	var cs censusTaker // pollServices: when the next census is owed and due
	for {
		if wait := time.Until(started.Add(kind.interval())); wait > 0 {
			if !sleep(ctx, wait) {
				return
			}
		}
		if !s.gate.wait(ctx) {
			return
		}
		started = time.Now()
		// Checked before every request, not only after one a renewal
		// cut: an agent can go and come back while this query waits
		// between requests, and its next request would then block on an
		// index of the old state.
		switch now := s.gen.seen(); {
		case now.resets != marks.resets:
			// Consul lost its state: start over, as at startup.
			index, last, afterErr = 0, 0, true
		case now.resumes != marks.resumes:
			index, afterErr = 0, true
		}
		marks = s.gen.seen()
		wait := s.cfg.Wait
		if kind == pollServices && s.census[dc].Load() {
			// A census owed and due is taken now; one owed but not yet
			// due shortens the wait of the blocking query.
			if cs.due() {
				cen := s.takeCensus(ctx, c, dcName, &cs)
				if ctx.Err() != nil {
					return
				}
				if !send(ctx, out, pollResult{dc: dc, kind: kind, census: cen, epoch: marks.resets}) {
					return
				}
			}
			wait = cs.bound(wait)
		}
		res := pollResult{dc: dc, kind: kind, epoch: marks.resets}
		var meta *api.QueryMeta
		res.err = s.request(ctx, index > 0, func(rctx context.Context) error {
			q := s.queryOptions(rctx, dcName)
			q.WaitIndex = index
			q.WaitTime = wait
			var err error
			meta, err = s.boundedStale(q, func(q *api.QueryOptions) (m *api.QueryMeta, err error) {
				switch kind {
				case pollServices:
					res.services, m, err = c.Catalog().Services(q)
				case pollChecks:
					// Only checks that are not passing: the answer stays
					// small in a healthy cluster while its index still
					// moves on every check change; a check missing from
					// it is passing (or gone, which for a passing check
					// changes no aggregate).
					q.Filter = `Status != "passing"`
					res.checks, m, err = c.Health().State(api.HealthAny, q)
				case pollNodes:
					res.nodes, m, err = c.Catalog().Nodes(q)
				}
				return m, err
			})
			return err
		})
		if ctx.Err() != nil {
			return
		}
		if errors.Is(res.err, errRenewed) {
			bo.Reset()
			continue
		}
		if res.err != nil {
			index, afterErr = 0, true
			res.err = fmt.Errorf("reading %s in %s: %w", kind, dcName, res.err)
			if !send(ctx, out, res) || !s.pause(ctx, bo.Next()) {
				return
			}
			continue
		}
		bo.Reset()
		res.index, res.meta = max(meta.LastIndex, 1), meta
		if kind == pollServices && res.index != last {
			cs.owed = true
		}
		switch {
		case res.index == last && !afterErr:
			index = last
			if !send(ctx, out, pollResult{dc: dc, kind: kind, index: index, meta: meta, unchanged: true, epoch: marks.resets}) {
				return
			}
			continue
		case res.index < last:
			res.reset = true
		}
		index, last, afterErr = res.index, res.index, false
		if kind == pollNodes {
			res.onNew, known = s.newNodeServices(ctx, c, dcName, res.nodes, known)
		}
		if !send(ctx, out, res) {
			return
		}
	}
}

// maxNewNodeReads bounds the node reads one answer of /v1/catalog/nodes
// causes; more new nodes at once (a cluster filling up) are left to the
// sweep their registrations cause anyway.
const maxNewNodeReads = 8

// newNodeServices reads the services of the nodes that appeared since the
// previous answer (known; nil before the first): an instance registered
// on a new node (a new VM, an ESM or sync node) changes no name, tag or
// non-passing check, and would otherwise wait for a sweep. One read per
// new node, on this blocking query's own connection. It returns the
// service names and the nodes of this answer.
func (s *Source) newNodeServices(ctx context.Context, c *api.Client, dc string, nodes []*api.Node, known map[string]bool) ([]string, map[string]bool) {
	now := make(map[string]bool, len(nodes))
	var fresh []string
	for _, n := range nodes {
		now[n.Node] = true
		if known != nil && !known[n.Node] {
			fresh = append(fresh, n.Node)
		}
	}
	if len(fresh) > maxNewNodeReads {
		return nil, now
	}
	var names []string
	for _, node := range fresh {
		var list *api.CatalogNodeServiceList
		err := s.request(ctx, false, func(rctx context.Context) error {
			var err error
			list, _, err = c.Catalog().NodeServiceList(node, s.queryOptions(rctx, dc))
			return err
		})
		if err != nil || list == nil {
			continue // the sweep its registration causes finds it
		}
		for _, svc := range list.Services {
			names = append(names, svc.Service)
		}
	}
	return names, now
}

// pause waits d, or less when the generation is renewed meanwhile; it
// returns false when ctx ended.
func (s *Source) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.gen.current().Done():
	}
	return ctx.Err() == nil
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
