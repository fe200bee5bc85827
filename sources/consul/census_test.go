package consul

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/internal/consultest"
)

// TestCensusFindsPassingInstances: on a service without a watch, an
// instance with a passing check removed or added changes no check that is
// not passing; the census of the checks names the service. Peeks are held
// once the source synced, so no sweep can find these changes: only the
// census can. (A held peek answers the index the service had before the
// hold, as if nothing had moved; a failed one would be retried as a full
// read.)
func TestCensusFindsPassingInstances(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()
	register := func(id string, port int) {
		t.Helper()
		_, err := c.Catalog().Register(&api.CatalogRegistration{Node: "census-node", Address: "10.3.0.1",
			Service: &api.AgentService{ID: id, Service: "census", Port: port},
			Check:   &api.AgentCheck{CheckID: "check-" + id, Name: "check", Status: api.HealthPassing, ServiceID: id}}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	register("census-1", 9001)
	register("census-2", 9002)

	var hold atomic.Bool
	var peeks, censuses atomic.Int64
	var peekMu sync.Mutex
	lastIndex := map[string]string{} // service path -> its X-Consul-Index before the hold
	r := startSource(t, agent, map[string]any{"watch": false}, func(s *Source) {
		s.wrap = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				q := req.URL.Query()
				switch {
				case hold.Load() && strings.Contains(q.Get("filter"), "Service.ID"):
					peeks.Add(1)
					peekMu.Lock()
					idx := lastIndex[req.URL.Path]
					peekMu.Unlock()
					return &http.Response{StatusCode: http.StatusOK, Request: req, Body: io.NopCloser(strings.NewReader("[]")),
						Header: http.Header{"X-Consul-Index": {idx}, "Content-Type": {"application/json"}}}, nil
				case !hold.Load() && strings.HasPrefix(req.URL.Path, "/v1/health/service/"):
					resp, err := rt.RoundTrip(req)
					if err == nil {
						peekMu.Lock()
						lastIndex[req.URL.Path] = resp.Header.Get("X-Consul-Index")
						peekMu.Unlock()
					}
					return resp, err
				case req.URL.Path == "/v1/health/state/any" && !q.Has("filter"):
					// Counted once answered: the census holds what
					// was there before the changes below.
					defer censuses.Add(1)
				}
				return rt.RoundTrip(req)
			})
		}
	})
	r.synced(patience)
	r.waitFor(patience, "both instances", func() bool { return len(r.endpointsOf("census")) == 2 })
	// Wait for a census taken after both instances were there: it is the
	// baseline the changes are compared with.
	base := censuses.Load()
	r.waitFor(patience, "a census", func() bool { return censuses.Load() > base })
	hold.Store(true)

	if _, err := c.Catalog().Deregister(&api.CatalogDeregistration{Node: "census-node", ServiceID: "census-2"}, nil); err != nil {
		t.Fatal(err)
	}
	r.waitFor(patience, "census-2 removed", func() bool {
		eps := r.endpointsOf("census")
		_, ok := eps[9002]
		return len(eps) == 1 && !ok
	})
	register("census-3", 9003)
	r.waitFor(patience, "census-3 added", func() bool { _, ok := r.endpointsOf("census")[9003]; return ok })
	t.Logf("%d censuses; %d peeks answered as before", censuses.Load(), peeks.Load())
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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
