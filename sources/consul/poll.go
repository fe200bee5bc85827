package consul

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
	// epoch: the resets before the request started (generation.resets).
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

// poller holds one of the blocking queries of a datacenter (catalog
// services, health state, catalog nodes), each in a goroutine of its own,
// and, for the catalog query, the censuses.
type poller struct {
	cl     *agentClient
	dc     int
	dcName string
	kind   pollKind
	// census: the datacenter has services without a watch, so the
	// catalog query takes censuses (sweeper).
	census *atomic.Bool
	out    chan<- pollResult
	// index is the index the next request blocks on, last the index of
	// the last answer. afterErr: the last request failed; the next answer
	// is diffed even at the index seen last: an agent restarted with a
	// fresh state often reaches that very index again (it replays the
	// same registrations) with other contents.
	index, last uint64
	afterErr    bool
	known       map[string]bool // nodes of the previous answer (pollNodes)
	bo          sources.Backoff
	marks       queryMarks
	cs          censusTaker // pollServices: when the next census is owed and due
}

func newPoller(cl *agentClient, dc int, dcName string, kind pollKind, census *atomic.Bool, out chan<- pollResult) *poller {
	return &poller{cl: cl, dc: dc, dcName: dcName, kind: kind, census: census, out: out,
		bo: sources.Backoff{Min: cl.cfg.RetryMin, Max: cl.cfg.RetryMax}, marks: cl.gen.seen()}
}

// run runs one blocking query until ctx ends, sending every answer
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
func (p *poller) run(ctx context.Context) {
	var started time.Time
	for {
		if wait := time.Until(started.Add(p.kind.interval())); wait > 0 {
			if !sleep(ctx, wait) {
				return
			}
		}
		if !p.cl.gate.wait(ctx) {
			return
		}
		started = time.Now()
		// Checked before every request, not only after one a renewal
		// cut: an agent can go and come back while this query waits
		// between requests, and its next request would then block on an
		// index of the old state.
		switch now := p.cl.gen.seen(); {
		case now.resets != p.marks.resets:
			// Consul lost its state: start over, as at startup.
			p.index, p.last, p.afterErr = 0, 0, true
		case now.resumes != p.marks.resumes:
			p.index, p.afterErr = 0, true
		}
		p.marks = p.cl.gen.seen()
		wait := p.cl.cfg.Wait
		if p.kind == pollServices && p.census.Load() {
			// A census owed and due is taken now; one owed but not yet
			// due shortens the wait of the blocking query.
			if p.cs.due() {
				cen := p.cs.take(ctx, p.cl, p.dcName)
				if ctx.Err() != nil {
					return
				}
				if !send(ctx, p.out, pollResult{dc: p.dc, kind: p.kind, census: cen, epoch: p.marks.resets}) {
					return
				}
			}
			wait = p.cs.bound(wait, minPollInterval)
		}
		res := p.ask(ctx, wait)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(res.err, errRenewed) {
			p.bo.Reset()
			continue
		}
		if res.err != nil {
			p.index, p.afterErr = 0, true
			if !send(ctx, p.out, res) || !p.cl.gen.pause(ctx, p.bo.Next()) {
				return
			}
			continue
		}
		p.bo.Reset()
		res.index = max(res.meta.LastIndex, 1)
		if p.kind == pollServices && res.index != p.last {
			p.cs.owed = true
		}
		switch {
		case res.index == p.last && !p.afterErr:
			p.index = p.last
			if !send(ctx, p.out, pollResult{dc: p.dc, kind: p.kind, index: p.index, meta: res.meta, unchanged: true, epoch: p.marks.resets}) {
				return
			}
			continue
		case res.index < p.last:
			res.reset = true
		}
		p.index, p.last, p.afterErr = res.index, res.index, false
		if p.kind == pollNodes {
			res.onNew, p.known = p.newNodeServices(ctx, res.nodes)
		}
		if !send(ctx, p.out, res) {
			return
		}
	}
}

// ask makes one request of the query, blocking for up to wait when it
// has an index to block on.
func (p *poller) ask(ctx context.Context, wait time.Duration) pollResult {
	res := pollResult{dc: p.dc, kind: p.kind, epoch: p.marks.resets}
	c := p.cl.c
	res.err = p.cl.request(ctx, p.index > 0, func(rctx context.Context) error {
		q := p.cl.queryOptions(rctx, p.dcName)
		q.WaitIndex = p.index
		q.WaitTime = wait
		var err error
		res.meta, err = p.cl.boundedStale(q, func(q *api.QueryOptions) (m *api.QueryMeta, err error) {
			switch p.kind {
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
	if res.err != nil && !errors.Is(res.err, errRenewed) {
		res.err = fmt.Errorf("reading %s in %s: %w", p.kind, p.dcName, res.err)
	}
	return res
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
func (p *poller) newNodeServices(ctx context.Context, nodes []*api.Node) ([]string, map[string]bool) {
	known := p.known
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
		err := p.cl.request(ctx, false, func(rctx context.Context) error {
			var err error
			list, _, err = p.cl.c.Catalog().NodeServiceList(node, p.cl.queryOptions(rctx, p.dcName))
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
