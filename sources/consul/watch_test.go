package consul

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// TestWatch runs the acceptance scenarios that can share one agent; each
// subtest watches only its own service names.
func TestWatch(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()

	t.Run("register web and api", func(t *testing.T) {
		r := startSource(t, agent, map[string]any{"services": map[string]any{"include": []any{"web", "api"}}})
		r.synced(patience)
		register(t, c, &api.AgentServiceRegistration{ID: "web-1", Name: "web", Address: "10.0.0.1", Port: 8081,
			Tags: []string{"v1", "primary"}, Meta: map[string]string{"version": "1"},
			Weights: &api.AgentWeights{Passing: 5, Warning: 1},
			Check:   &api.AgentServiceCheck{CheckID: "web-1-ttl", TTL: "1m", Status: api.HealthPassing}})
		register(t, c, &api.AgentServiceRegistration{ID: "web-2", Name: "web", Address: "10.0.0.2", Port: 8082,
			Tags: []string{"v1"}, Meta: map[string]string{"version": "1"}, Weights: &api.AgentWeights{Passing: 3, Warning: 1}})
		register(t, c, &api.AgentServiceRegistration{ID: "api-1", Name: "api", Port: 9091})
		// Bad data: a host name is no EDS address; the instance is dropped
		// and counted, the rest of the service served.
		register(t, c, &api.AgentServiceRegistration{ID: "api-bad", Name: "api", Address: "api.example", Port: 9092})
		took := r.waitFor(patience, "web with 2 endpoints and api with 1", func() bool {
			return len(r.endpointsOf("web")) == 2 && len(r.endpointsOf("api")) == 1
		})
		t.Logf("visible after %v", took)
		web := r.endpointsOf("web")
		want1 := sources.Endpoint{Address: "10.0.0.1", Port: 8081, Weight: 5, Health: sources.HealthHealthy,
			Locality: sources.Locality{Region: "dc1"}, Metadata: map[string]string{"tags": "primary,v1", "version": "1",
				"tag:primary": "true", "tag:v1": "true", "datacenter": "dc1"}}
		for k, v := range web[8081].Metadata {
			if strings.HasPrefix(k, MetaNodePrefix) {
				want1.Metadata[k] = v // the dev agent's node meta
			}
		}
		if !web[8081].Equal(want1) {
			t.Errorf("web-1 = %+v, want %+v", web[8081], want1)
		}
		if e := web[8082]; e.Weight != 3 || e.Address != "10.0.0.2" || e.Metadata["tags"] != "v1" || e.Health != sources.HealthHealthy {
			t.Errorf("web-2 = %+v", e)
		}
		if e := r.endpointsOf("api")[9091]; e.Address != "127.0.0.1" {
			t.Errorf("api-1 = %+v, want the node address 127.0.0.1", e)
		}
		r.waitFor(patience, "the instance with a host name address counted as dropped", func() bool {
			return r.status.Snapshot().Dropped > 0
		})
		if n := len(r.endpointsOf("api")); n != 1 {
			t.Errorf("api has %d endpoints, want 1 (the bad one dropped)", n)
		}

		// A second instance of a known service, without checks, changes
		// neither the service list nor any check: only the sweep sees it.
		register(t, c, &api.AgentServiceRegistration{ID: "web-3", Name: "web", Address: "10.0.0.3", Port: 8083})
		took = r.waitFor(patience, "web-3 (no checks)", func() bool { return len(r.endpointsOf("web")) == 3 })
		t.Logf("instance without checks visible after %v", took)

		// An address change of an instance without checks, likewise.
		register(t, c, &api.AgentServiceRegistration{ID: "web-3", Name: "web", Address: "10.0.0.33", Port: 8083})
		r.waitFor(patience, "web-3 moved", func() bool { return r.endpointsOf("web")[8083].Address == "10.0.0.33" })

		// Re-registering the same definition changes nothing: nothing is
		// published.
		n := r.updateCount()
		register(t, c, &api.AgentServiceRegistration{ID: "web-3", Name: "web", Address: "10.0.0.33", Port: 8083})
		register(t, c, &api.AgentServiceRegistration{ID: "other-1", Name: "other", Port: 1})
		quiet(t, 300*time.Millisecond, func() bool { return r.updateCount() != n })
	})

	t.Run("health", func(t *testing.T) {
		sel := map[string]any{"include": []any{"hc"}}
		unhealthy := startSource(t, agent, map[string]any{"services": sel})
		drop := startSource(t, agent, map[string]any{"services": sel, "critical": "drop"})
		unhealthy.synced(patience)
		drop.synced(patience)
		for i, port := range []int{7001, 7002} {
			id := []string{"hc-1", "hc-2"}[i]
			register(t, c, &api.AgentServiceRegistration{ID: id, Name: "hc", Address: "10.0.1.1", Port: port,
				Weights: &api.AgentWeights{Passing: 4, Warning: 2},
				Check:   &api.AgentServiceCheck{CheckID: id + "-ttl", TTL: "10m", Status: api.HealthPassing}})
		}
		healthOf := func(r *running, port uint32) (sources.Health, bool) {
			e, ok := r.endpointsOf("hc")[port]
			return e.Health, ok
		}
		is := func(r *running, port uint32, h sources.Health) func() bool {
			return func() bool { got, ok := healthOf(r, port); return ok && got == h }
		}
		unhealthy.waitFor(patience, "hc healthy", is(unhealthy, 7001, sources.HealthHealthy))
		drop.waitFor(patience, "hc healthy", is(drop, 7001, sources.HealthHealthy))

		ttl := func(status string) {
			t.Helper()
			if err := c.Agent().UpdateTTL("hc-1-ttl", "", status); err != nil {
				t.Fatal(err)
			}
		}
		ttl(api.HealthCritical)
		took := unhealthy.waitFor(patience, "hc-1 unhealthy", is(unhealthy, 7001, sources.HealthUnhealthy))
		drop.waitFor(patience, "hc-1 dropped", func() bool {
			_, ok := healthOf(drop, 7001)
			return !ok && len(drop.endpointsOf("hc")) == 1
		})
		t.Logf("critical visible after %v", took)

		ttl(api.HealthWarning)
		unhealthy.waitFor(patience, "hc-1 healthy at Weights.Warning 2", func() bool {
			e, ok := unhealthy.endpointsOf("hc")[7001]
			return ok && e.Health == sources.HealthHealthy && e.Weight == 2
		})
		ttl(api.HealthPassing)
		unhealthy.waitFor(patience, "hc-1 healthy again", is(unhealthy, 7001, sources.HealthHealthy))
		drop.waitFor(patience, "hc-1 back", is(drop, 7001, sources.HealthHealthy))

		if err := c.Agent().EnableServiceMaintenance("hc-2", "test"); err != nil {
			t.Fatal(err)
		}
		unhealthy.waitFor(patience, "hc-2 draining", is(unhealthy, 7002, sources.HealthDraining))
		if err := c.Agent().DisableServiceMaintenance("hc-2"); err != nil {
			t.Fatal(err)
		}
		unhealthy.waitFor(patience, "hc-2 healthy after maintenance", is(unhealthy, 7002, sources.HealthHealthy))
	})

	t.Run("cached reads follow check changes", func(t *testing.T) {
		// With cached: true the agent cache answers reads queued by check
		// changes; a read that answers below the check's index (cache not
		// yet refreshed) is repeated, so no flip is missed.
		var mu sync.Mutex
		cacheAnswers := map[string]int{} // X-Cache header -> count
		// The read path: a watch would see the flips without reads.
		r := startSource(t, agent, map[string]any{"services": map[string]any{"include": []any{"cached"}}, "cached": true, "warning": "degraded", "watch": false},
			func(s *Source) {
				s.wrap = func(next http.RoundTripper) http.RoundTripper {
					return rtFunc(func(req *http.Request) (*http.Response, error) {
						resp, err := next.RoundTrip(req)
						if err == nil && req.URL.Query().Has("cached") {
							mu.Lock()
							cacheAnswers[resp.Header.Get("X-Cache")]++
							mu.Unlock()
						}
						return resp, err
					})
				}
			})
		register(t, c, &api.AgentServiceRegistration{ID: "cached-1", Name: "cached", Address: "10.0.7.1", Port: 7101,
			Check: &api.AgentServiceCheck{CheckID: "cached-1-ttl", TTL: "10m", Status: api.HealthPassing}})
		r.synced(patience)
		for i, status := range []string{api.HealthCritical, api.HealthPassing, api.HealthCritical, api.HealthWarning, api.HealthPassing} {
			if err := c.Agent().UpdateTTL("cached-1-ttl", "", status); err != nil {
				t.Fatal(err)
			}
			want := map[string]sources.Health{api.HealthCritical: sources.HealthUnhealthy, api.HealthPassing: sources.HealthHealthy,
				api.HealthWarning: sources.HealthDegraded}[status]
			r.waitFor(patience, fmt.Sprintf("flip %d to %s", i, status), func() bool {
				e, ok := r.endpointsOf("cached")[7101]
				return ok && e.Health == want
			})
		}
		mu.Lock()
		defer mu.Unlock()
		if cacheAnswers["HIT"]+cacheAnswers["MISS"] == 0 {
			t.Errorf("no read went through the agent cache: %v", cacheAnswers)
		}
		t.Logf("agent cache answers: %v", cacheAnswers)
	})

	t.Run("an unreachable other datacenter does not hold back the local one", func(t *testing.T) {
		register(t, c, &api.AgentServiceRegistration{ID: "local-1", Name: "local", Address: "10.0.8.1", Port: 8101})
		r := startSource(t, agent, map[string]any{"services": map[string]any{"include": []any{"local"}},
			"datacenters": []any{"dc1", "nowhere"}})
		r.synced(patience)
		r.waitFor(patience, "local served", func() bool { return len(r.endpointsOf("local")) == 1 })
		r.waitFor(patience, "stale: nowhere cannot be read", func() bool {
			s := r.status.Snapshot()
			return s.Stale && strings.Contains(s.LastError, "nowhere")
		})
		// Changes of the datacenter that answers still flow.
		register(t, c, &api.AgentServiceRegistration{ID: "local-2", Name: "local", Address: "10.0.8.2", Port: 8102})
		r.waitFor(patience, "local-2 served", func() bool { return len(r.endpointsOf("local")) == 2 })
	})

	t.Run("max_read_rate paces reads", func(t *testing.T) {
		for i := range 10 {
			register(t, c, &api.AgentServiceRegistration{ID: fmt.Sprintf("paced-%d", i), Name: fmt.Sprintf("paced-%d", i), Port: 100 + i})
		}
		start := time.Now()
		r := startSource(t, agent, map[string]any{"services": map[string]any{"include": []any{"paced-*"}}, "max_read_rate": 20})
		r.synced(patience)
		r.mu.Lock()
		took, n := r.full.Sub(start), len(r.state)
		r.mu.Unlock()
		// 10 reads 50ms apart: the last starts 450ms after the first.
		if n != 10 || took < 400*time.Millisecond {
			t.Errorf("first sync of %d services took %v; want 10 services, paced to at least 400ms", n, took)
		}
	})

	t.Run("deregister and new service", func(t *testing.T) {
		sel := map[string]any{"include": []any{"gone", "late"}}
		keep := startSource(t, agent, map[string]any{"services": sel})
		remove := startSource(t, agent, map[string]any{"services": sel, "on_empty": "remove"})
		register(t, c, &api.AgentServiceRegistration{ID: "gone-1", Name: "gone", Address: "10.0.2.1", Port: 1})
		keep.synced(patience)
		remove.synced(patience)
		for _, r := range []*running{keep, remove} {
			r.waitFor(patience, "gone present", func() bool { return len(r.endpointsOf("gone")) == 1 })
		}
		deregister(t, c, "gone-1")
		keep.waitFor(patience, "gone empty", func() bool {
			s, ok := keep.service("gone")
			return ok && len(s.Endpoints) == 0
		})
		remove.waitFor(patience, "gone removed", func() bool { _, ok := remove.service("gone"); return !ok })

		register(t, c, &api.AgentServiceRegistration{ID: "late-1", Name: "late", Address: "10.0.2.2", Port: 2})
		for _, r := range []*running{keep, remove} {
			r.waitFor(patience, "late appears", func() bool { return len(r.endpointsOf("late")) == 1 })
		}
	})
}

// quiet fails the test if changed reports true within d.
func quiet(t testing.TB, d time.Duration, changed func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if changed() {
			t.Fatal("an update was published although nothing changed")
		}
		<-tick.C
	}
}

// TestDatacenters federates two agents (dc1, dc2) and watches both: with
// the default cluster_name the instances of both merge into one cluster,
// dc2's at the priority datacenter_priority gives it; with a template naming the
// datacenter they stay apart.
func TestDatacenters(t *testing.T) {
	dc1 := consultest.Start(t)
	dc2 := consultest.Start(t, consultest.WithDatacenter("dc2"))
	dc1.JoinWAN(dc2)
	register(t, dc1.Client(), &api.AgentServiceRegistration{ID: "multi-1", Name: "multi", Address: "10.0.6.1", Port: 6101})
	register(t, dc2.Client(), &api.AgentServiceRegistration{ID: "multi-2", Name: "multi", Address: "10.0.6.2", Port: 6102})
	sel := map[string]any{"include": []any{"multi"}}
	merged := startSource(t, dc1, map[string]any{"services": sel, "datacenters": []any{"dc1", "dc2"}, "datacenter_priority": map[string]any{"dc2": 3}})
	apart := startSource(t, dc1, map[string]any{"services": sel, "datacenters": []any{"dc1", "dc2"}, "cluster_name": "{{.Service}}.{{.Datacenter}}"})
	merged.synced(patience)
	apart.synced(patience)
	merged.waitFor(patience, "multi from both datacenters", func() bool { return len(merged.endpointsOf("multi")) == 2 })
	eps := merged.endpointsOf("multi")
	if e := eps[6101]; e.Priority != 0 || e.Locality.Region != "dc1" {
		t.Errorf("dc1 instance = %+v, want priority 0, region dc1", e)
	}
	if e := eps[6102]; e.Priority != 3 || e.Locality.Region != "dc2" {
		t.Errorf("dc2 instance = %+v, want priority 3, region dc2", e)
	}
	apart.waitFor(patience, "multi.dc1 and multi.dc2", func() bool {
		return len(apart.endpointsOf("multi.dc1")) == 1 && len(apart.endpointsOf("multi.dc2")) == 1
	})
	// A change in the remote datacenter is watched too.
	deregister(t, dc2.Client(), "multi-2")
	merged.waitFor(patience, "dc2 instance gone", func() bool { return len(merged.endpointsOf("multi")) == 1 })
}
