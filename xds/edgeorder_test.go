package xds

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/translate"
)

// An edge Envoy whose bootstrap holds only the server: it takes its
// listener, route configuration, secret, clusters and endpoints from the
// engine, on each variant, while services come, go and trade a route, 100
// times each, under steady endpoint churn. The simulated Envoy warms like
// Envoy and sends a request down every route after every response it
// applies; none may meet a warming or missing cluster, and nothing may
// arrive out of make-before-break order. The same run against the engine
// with its gate off shows that the check bites.

// edgeWorld is the services of the scenario: name -> its route tag (""
// for none).
type edgeWorld struct {
	rules    *translate.Routes
	services map[string]string
	gen      int // endpoint generation, for churn
}

// resources are the engine's resources for the world: every service's
// cluster and assignment, the route configuration "edge" built from their
// tags, and the "edge" listener with its secret.
func (w *edgeWorld) resources(t testing.TB, names ...string) []Resource {
	t.Helper()
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(w.services))
	}
	var out []Resource
	var claims []translate.Claim
	for _, name := range slices.Sorted(maps.Keys(w.services)) {
		svc := w.service(name)
		c, _ := w.rules.Claims(svc)
		claims = append(claims, c...)
		if !slices.Contains(names, name) {
			continue
		}
		r, err := translate.Service(svc, translate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, edgeScoped(Resource{Type: ClusterType, Name: name, Message: r.Cluster}),
			edgeScoped(Resource{Type: EndpointType, Name: name, Message: r.Assignment}))
	}
	rc, _, err := w.rules.RouteConfiguration("edge", claims)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, edgeScoped(Resource{Type: RouteType, Name: "edge", Message: rc}))
}

func (w *edgeWorld) service(name string) sources.Service {
	svc := sources.Service{Name: name, Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: uint32(1000 + w.gen%1000), Health: sources.HealthHealthy},
	}}
	if tag := w.services[name]; tag != "" {
		svc.Endpoints[0].Metadata = map[string]string{sources.MetaTags: tag}
	}
	return svc
}

// edgeScoped puts r in the edge scope (1), where the scenario's node is.
func edgeScoped(r Resource) Resource {
	r.Scopes = ScopeSet(0).With(1)
	return r
}

// edgeStatic are the listener and the secret it names, granted to scope 1.
func edgeStatic(t testing.TB) []Resource {
	t.Helper()
	l, err := translate.NewListener(translate.ListenerSpec{Name: "edge", Port: 8443, RouteConfig: "edge",
		TLS: &translate.TLSSpec{Certificates: []string{"edge_cert"}}})
	if err != nil {
		t.Fatal(err)
	}
	sec := &tlsv3.Secret{Name: "edge_cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		PrivateKey: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: keyBytes}},
	}}}
	return []Resource{edgeScoped(Resource{Type: ListenerType, Name: "edge", Message: l}),
		{Type: SecretType, Name: "edge_cert", Message: sec, Private: true, Scopes: ScopeSet(0).With(1)}}
}

// runEdgeScenario runs the scenario against s for variant v and returns
// what the simulated Envoy's requests met.
func runEdgeScenario(t *testing.T, s *Server, v variant, rounds int) envoysim.Traffic {
	t.Helper()
	rule, err := translate.NewRouteRule(translate.RouteRule{Config: "edge", TagPrefix: translate.DefaultTagPrefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &edgeWorld{rules: &translate.Routes{Rules: []translate.RouteRule{rule}}, services: map[string]string{
		"a": "urlprefix-/move", "b": "", "churn-1": "urlprefix-/c1", "churn-2": "urlprefix-/c2",
	}}
	s.SetScopes(func(*corev3.Node) (int, string) { return 1, "edge" })
	s.Apply(append(w.resources(t), edgeStatic(t)...), nil)
	addr := listen(t, s)
	c, err := envoysim.Start(context.Background(), envoysim.Options{Addr: addr, Node: "edge-1", Delta: v.delta,
		PerType: v.perType, Listeners: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var mu sync.Mutex // orders the world's changes; Apply itself needs nothing
	expect := func() {
		t.Helper()
		mu.Lock()
		rc := w.resources(t, "none")[0].Message.(*routev3.RouteConfiguration)
		want := slices.Sorted(maps.Keys(w.services))
		mu.Unlock()
		h, err := envoysim.Hash(rc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := c.WaitFor(ctx, func(st envoysim.State) bool {
			return st.Hashes[RouteType]["edge"] == h && slices.Equal(slices.Sorted(maps.Keys(st.Clusters)), want) &&
				c.Request("edge", "example.com", "/").Status != 0 // the listener is warm
		}); err != nil {
			t.Fatal(err)
		}
	}
	routed := func(want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := c.WaitFor(ctx, func(envoysim.State) bool {
			got := c.Request("edge", "example.com", "/move/x")
			return got.Cluster == want && got.Status == 200
		}); err != nil {
			t.Fatalf("a request for /move/x does not reach %s: %+v (%v)", want, c.Request("edge", "example.com", "/move/x"), err)
		}
	}
	expect()
	routed("a")

	// Endpoint churn for the whole run.
	ctx, stop := context.WithCancel(context.Background())
	var churn sync.WaitGroup
	churn.Go(func() {
		// Paced, not synchronised: a change every 2ms keeps the engine
		// busy without taking a core of a loaded machine.
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			w.gen++
			rs := w.resources(t, "churn-1", "churn-2")
			mu.Unlock()
			s.Apply(rs[:4], nil) // the assignments and clusters; the route configuration is unchanged
		}
	})
	defer func() { stop(); churn.Wait() }()

	change := func(f func() []Key) {
		mu.Lock()
		rm := f()
		rs := w.resources(t, slices.Collect(maps.Keys(w.services))...)
		mu.Unlock()
		s.Apply(rs, rm)
		expect()
	}
	for i := range rounds {
		name := fmt.Sprintf("new-%d", i)
		change(func() []Key { w.services[name] = "urlprefix-/" + name; return nil }) // a service with a route comes
		change(func() []Key {                                                        // it goes
			delete(w.services, name)
			return []Key{{Type: ClusterType, Name: name}, {Type: EndpointType, Name: name}}
		})
		change(func() []Key { // the route moves
			w.services["a"], w.services["b"] = w.services["b"], w.services["a"]
			return nil
		})
	}
	stop()
	churn.Wait()
	want := "a"
	if rounds%2 == 1 {
		want = "b"
	}
	routed(want)
	return c.Traffic()
}

func TestEdgeMakeBeforeBreak(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tr := runEdgeScenario(t, NewServer(Options{}), v, 100)
			t.Logf("%s: %d simulated requests, %d misses, %d out of order", v.name, tr.Requests, tr.Misses, tr.OutOfOrder)
			if tr.Misses != 0 || tr.OutOfOrder != 0 {
				t.Errorf("%d of %d requests met a warming or missing cluster (last: %s); %d resources out of order (last: %s)",
					tr.Misses, tr.Requests, tr.LastMiss, tr.OutOfOrder, tr.LastOutOfOrder)
			}
			if tr.Requests < 300 {
				t.Errorf("only %d simulated requests", tr.Requests)
			}
		})
	}
}

// TestEdgeWithoutGate runs the scenario against the engine with its gate
// off, each type pushed as it comes: the simulated Envoy must see what the
// gate prevents, or the scenario proves nothing.
func TestEdgeWithoutGate(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			s := NewServer(Options{})
			s.gate.off = true
			tr := runEdgeScenario(t, s, v, 20)
			t.Logf("%s without the gate: %d simulated requests, %d misses, %d out of order", v.name, tr.Requests, tr.Misses, tr.OutOfOrder)
			if tr.Misses == 0 && tr.OutOfOrder == 0 {
				t.Errorf("the engine without its gate sent nothing out of order: the scenario does not test the gate")
			}
		})
	}
}
