package consul

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
)

// Censuses. Over plain HTTP some services have no watch, and the bulk
// queries do not say which of them an instance added or removed, a new
// port or a new address concerns: /v1/catalog/services lists names and
// tags, and the checks query sees only checks that are not passing. The
// catalog's index does move on each such change, so while a datacenter
// has services without a watch, the catalog query takes a census of it
// after its index moved: a non-blocking read of every node with its
// service instances and checks (/v1/internal/ui/nodes, the listing the
// agent's web UI reads). Each instance's ModifyIndex moves when it is
// registered again with other contents; an instance or check that
// appeared, vanished or changed since the previous census names its
// service, which is read. A dump sees every kind of change, so while
// dumps succeed no sweep runs (sweeper).
//
// The dump is part of the agent's HTTP API for its UI rather than of the
// documented API. When the agent refuses it (an older or newer agent
// without it, a token that may not use it) or answers something that
// does not decode, the source falls back for the rest of its run to a
// census of every check (/v1/health/state/any, unfiltered): a check that
// appeared or vanished names its service, so an instance with checks
// added or removed is still found at once; the rest is left to sweeps.
// A dump that ACLs filtered may miss instances: sweeps run beside it.
//
// Cost: a dump lists every instance and check of the datacenter, which
// the agent (and, from a client agent, a server) assembles and encodes
// for every census. Censuses are taken at most once per censusInterval,
// and the time the agent took to answer the last one (its first byte)
// spaces the next so that censuses keep the agent busy at most
// censusShare of the time: a larger catalog is censused less often.
const (
	censusInterval = time.Second
	censusShare    = 0.2
)

// censusMaxBackoff bounds the spacing of censuses that keep failing.
const censusMaxBackoff = time.Minute

// msgCensusFailed is logged when censuses start failing.
const msgCensusFailed = "taking a census of the catalog failed; sweeps run until one succeeds"

// msgNoDump is logged when the agent refuses a dump.
const msgNoDump = "the agent does not answer /v1/internal/ui/nodes; censuses list checks only, and sweeps find instances without checks"

// census is what one census saw, or why it failed.
type census struct {
	// dump: the instances were listed (not only the checks); filtered:
	// ACLs hid some of the answer.
	dump, filtered bool
	seen           map[censusKey]censusEntry
	err            error
	// took is how long the agent took to answer; every how long the next
	// census waits at least.
	took, every time.Duration
}

// censusKey names an instance (check false) or a check of a node.
type censusKey struct {
	node, id string
	check    bool
}

// censusEntry is an instance's service and ModifyIndex, or a check's
// service and CreateIndex (a check removed and added again differs).
type censusEntry struct {
	service string
	index   uint64
}

// censusTaker is the catalog query's record of its censuses.
type censusTaker struct {
	owed   bool      // the catalog's index moved since the last census
	next   time.Time // the earliest start of the next census
	noDump bool      // the agent refused a dump: censuses list checks only
	fails  int       // censuses failed in a row
	logged bool      // the failures in a row were logged
}

// due reports whether a census is owed and may start now.
func (t *censusTaker) due() bool { return t.owed && !time.Now().Before(t.next) }

// bound shortens wait, the wait of the catalog's blocking query, so that
// an owed census is not held up by a catalog that stopped moving; the
// wait stays at least floor.
func (t *censusTaker) bound(wait, floor time.Duration) time.Duration {
	if !t.owed {
		return wait
	}
	return min(wait, max(time.Until(t.next), floor))
}

// dumpNode is what a census keeps of one node of /v1/internal/ui/nodes.
type dumpNode struct {
	Node     string
	Services []struct {
		ID, Service string
		ModifyIndex uint64
	}
	Checks api.HealthChecks
}

// take takes one census of datacenter dc and says when the next may
// start; a failure is in the result's err, and failures in a row space the
// next census further, up to censusMaxBackoff.
func (t *censusTaker) take(ctx context.Context, cl *agentClient, dc string) *census {
	for {
		start := time.Now()
		var firstByte atomic.Int64
		cen := &census{dump: !t.noDump, seen: map[censusKey]censusEntry{}}
		cen.err = cl.request(ctx, false, func(rctx context.Context) error {
			rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
				GotFirstResponseByte: func() { firstByte.Store(int64(time.Since(start))) },
			})
			q := cl.queryOptions(rctx, dc)
			var meta *api.QueryMeta
			var err error
			if cen.dump {
				var nodes []dumpNode
				if meta, err = cl.c.Raw().Query("/v1/internal/ui/nodes", &nodes, q); err == nil {
					for _, n := range nodes {
						for _, i := range n.Services {
							cen.seen[censusKey{node: n.Node, id: i.ID}] = censusEntry{i.Service, i.ModifyIndex}
						}
						cen.add(n.Checks)
					}
				}
			} else {
				var checks api.HealthChecks
				if checks, meta, err = cl.c.Health().State(api.HealthAny, q); err == nil {
					cen.add(checks)
				}
			}
			if err == nil {
				cen.filtered = meta.ResultsFilteredByACLs
			}
			return err
		})
		took := time.Duration(firstByte.Load())
		if took == 0 {
			took = time.Since(start)
		}
		cen.took, cen.every = took, max(censusInterval, time.Duration(float64(took)/censusShare))
		switch {
		case cen.err == nil:
			t.owed, t.fails, t.logged = false, 0, false
		case cen.dump && refusedDump(cen.err):
			t.noDump = true
			cl.log.Warn(msgNoDump, "err", cen.err)
			continue
		case errors.Is(cen.err, errRenewed) || ctx.Err() != nil:
		default:
			// A census that keeps failing (an answer over
			// max_response_bytes, an agent too slow to list everything
			// within read_timeout) is tried less and less often; sweeps
			// run meanwhile. The failures in a row are logged once: at
			// the first with an HTTP answer, or at the second without
			// one (a census cut by an agent that stopped answering is
			// the agent's failure, which the source logs as such).
			if t.fails++; !t.logged && (statusCode(cen.err) != 0 || t.fails > 1) {
				t.logged = true
				cl.log.Warn(msgCensusFailed, "datacenter", dc, "err", cen.err)
			}
			cen.every = min(max(cen.every, censusInterval<<min(t.fails, 6)), censusMaxBackoff)
		}
		t.next = time.Now().Add(cen.every)
		return cen
	}
}

// add records the service checks of checks (node checks are the nodes
// query's).
func (c *census) add(checks api.HealthChecks) {
	for _, ch := range checks {
		if ch.ServiceName != "" {
			c.seen[censusKey{node: ch.Node, id: ch.CheckID, check: true}] = censusEntry{ch.ServiceName, ch.CreateIndex}
		}
	}
}

// refusedDump reports whether err says the agent will not give a dump
// (as opposed to failing for the moment): a client error other than a
// rate limit or a refused token (those fail every request), an answer
// that did not decode, or one larger than max_response_bytes.
func refusedDump(err error) bool {
	if code := statusCode(err); code >= 400 && code < 500 {
		return code != http.StatusTooManyRequests && code != http.StatusForbidden
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, errTooLarge)
}
