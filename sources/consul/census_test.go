package consul

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// censusRig is a source without watches on an agent with one service of
// two instances (each with a passing check) on a catalog node. Once hold
// is set, every peek answers the index its service had before, as if
// nothing had moved, so no sweep can find a change: only a census can (a
// failing peek would be retried as a full read, which would).
type censusRig struct {
	c        *api.Client
	r        *running
	hold     atomic.Bool
	dumps    atomic.Int64 // dumps answered
	checks   atomic.Int64 // check censuses answered
	failed   atomic.Int64 // censuses failed (failCensus)
	mu       sync.Mutex
	lastSeen map[string]string // service path -> X-Consul-Index before the hold
}

// The agent the rig's source sees: one that answers dumps, one that
// refuses them (404), one whose censuses all fail (500).
const (
	dumps = iota
	refuseDump
	failCensus
)

func startCensusRig(t *testing.T, agentKind int) *censusRig {
	t.Helper()
	agent := consultest.Start(t)
	g := &censusRig{c: agent.Client(), lastSeen: map[string]string{}}
	g.register(t, "census-1", 9001, true)
	g.register(t, "census-2", 9002, true)
	g.r = startSource(t, agent, map[string]any{"watch": false}, func(s *Source) {
		s.wrap = func(rt http.RoundTripper) http.RoundTripper {
			return rtFunc(func(req *http.Request) (*http.Response, error) { return g.roundTrip(rt, req, agentKind) })
		}
	})
	g.r.synced(patience)
	g.r.waitFor(patience, "both instances", func() bool { return len(g.r.endpointsOf("census")) == 2 })
	return g
}

func (g *censusRig) roundTrip(rt http.RoundTripper, req *http.Request, agentKind int) (*http.Response, error) {
	q := req.URL.Query()
	census := req.URL.Path == "/v1/internal/ui/nodes" || req.URL.Path == "/v1/health/state/any" && !q.Has("filter")
	switch {
	case census && agentKind == failCensus:
		g.failed.Add(1)
		return answer(req, http.StatusInternalServerError, "", "listing failed"), nil
	case req.URL.Path == "/v1/internal/ui/nodes" && agentKind == refuseDump:
		return answer(req, http.StatusNotFound, "", "not found"), nil
	case req.URL.Path == "/v1/internal/ui/nodes":
		// Counted once answered: the census holds what was there
		// before the changes the test makes next.
		defer g.dumps.Add(1)
	case req.URL.Path == "/v1/health/state/any" && !q.Has("filter"):
		defer g.checks.Add(1)
	case g.hold.Load() && strings.Contains(q.Get("filter"), "Service.ID"):
		g.mu.Lock()
		idx := g.lastSeen[req.URL.Path]
		g.mu.Unlock()
		return answer(req, http.StatusOK, idx, "[]"), nil
	case !g.hold.Load() && strings.HasPrefix(req.URL.Path, "/v1/health/service/"):
		resp, err := rt.RoundTrip(req)
		if err == nil {
			g.mu.Lock()
			g.lastSeen[req.URL.Path] = resp.Header.Get("X-Consul-Index")
			g.mu.Unlock()
		}
		return resp, err
	}
	return rt.RoundTrip(req)
}

func answer(req *http.Request, code int, index, body string) *http.Response {
	h := http.Header{"Content-Type": {"application/json"}}
	if index != "" {
		h.Set("X-Consul-Index", index)
	}
	return &http.Response{StatusCode: code, Request: req, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

func (g *censusRig) register(t *testing.T, id string, port int, checked bool) {
	t.Helper()
	reg := &api.CatalogRegistration{Node: "census-node", Address: "10.3.0.1",
		Service: &api.AgentService{ID: id, Service: "census", Port: port}}
	if checked {
		reg.Check = &api.AgentCheck{CheckID: "check-" + id, Name: "check", Status: api.HealthPassing, ServiceID: id}
	}
	if _, err := g.c.Catalog().Register(reg, nil); err != nil {
		t.Fatal(err)
	}
}

func (g *censusRig) deregister(t *testing.T, id string) {
	t.Helper()
	if _, err := g.c.Catalog().Deregister(&api.CatalogDeregistration{Node: "census-node", ServiceID: id}, nil); err != nil {
		t.Fatal(err)
	}
}

// holdAfterCensus waits for a census, the baseline the changes are
// compared with (the catalog's first answer owes one; both instances were
// registered before the source started, so any census has them), then
// holds peeks.
func (g *censusRig) holdAfterCensus(count *atomic.Int64) {
	g.r.waitFor(patience, "a census", func() bool { return count.Load() > 0 })
	g.hold.Store(true)
}

func (g *censusRig) waitPort(port uint32, present bool) {
	g.r.waitFor(patience, "census instances", func() bool {
		_, ok := g.r.endpointsOf("census")[port]
		return ok == present
	})
}

// TestCensusFindsEveryChange: on services without a watch, the census of
// every instance finds the changes no filtered query shows: an instance
// with a passing check removed or added, an instance without checks added,
// a port changed by registering an instance again.
func TestCensusFindsEveryChange(t *testing.T) {
	g := startCensusRig(t, dumps)
	g.holdAfterCensus(&g.dumps)
	g.deregister(t, "census-2")
	g.waitPort(9002, false)
	g.register(t, "census-3", 9003, true)
	g.waitPort(9003, true)
	g.register(t, "census-4", 9004, false)
	g.waitPort(9004, true)
	g.register(t, "census-4", 9104, false)
	g.waitPort(9104, true)
	g.waitPort(9004, false)
	if n := g.checks.Load(); n != 0 {
		t.Errorf("%d censuses of the checks alone, want none while the agent answers dumps", n)
	}
}

// TestCensusOfChecks: an agent that refuses the dump still has its
// instances with checks counted: one added or removed is found by a census
// of the checks.
func TestCensusOfChecks(t *testing.T) {
	g := startCensusRig(t, refuseDump)
	g.holdAfterCensus(&g.checks)
	g.deregister(t, "census-2")
	g.waitPort(9002, false)
	g.register(t, "census-3", 9003, true)
	g.waitPort(9003, true)
	if n := g.dumps.Load(); n != 0 {
		t.Errorf("%d dumps answered by an agent that refuses them", n)
	}
	if g.r.logs.count(msgNoDump) != 1 {
		t.Errorf("the fallback to censuses of the checks was logged %d times, want once", g.r.logs.count(msgNoDump))
	}
}

// TestFailingCensus: censuses that fail are tried less and less often,
// logged once, and leave the changes to sweeps.
func TestFailingCensus(t *testing.T) {
	g := startCensusRig(t, failCensus)
	g.r.waitFor(patience, "a failed census", func() bool { return g.failed.Load() > 0 })
	g.deregister(t, "census-2")
	g.waitPort(9002, false)
	g.register(t, "census-4", 9004, false)
	g.waitPort(9004, true)
	// Spaced 1, 2, 4... seconds apart; a census retried at once would
	// have failed hundreds of times by now.
	if n := g.failed.Load(); n > 10 {
		t.Errorf("%d censuses failed, want a few (they back off)", n)
	}
	if n := g.r.logs.count(msgCensusFailed); n != 1 {
		t.Errorf("the failing censuses were logged %d times, want once", n)
	}
}

// TestNoCensusWhenAllWatched: with a watch on every service the watches
// answer every change, and the source takes no census.
func TestNoCensusWhenAllWatched(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()
	if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "w-1", Name: "w", Port: 9001}); err != nil {
		t.Fatal(err)
	}
	r := startSource(t, agent, map[string]any{})
	r.synced(patience)
	r.waitFor(patience, "w served", func() bool { return len(r.endpointsOf("w")) == 1 })
	// The flag follows the catalog's answers: a registration makes one.
	if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "w-2", Name: "w", Port: 9002}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(patience, "w-2 served", func() bool { return len(r.endpointsOf("w")) == 2 })
	r.waitFor(patience, "no census wanted", func() bool { return !r.src.census[0].Load() })
}
