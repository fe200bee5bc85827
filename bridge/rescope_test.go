package bridge

import (
	"log/slog"
	"maps"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

// peakLive runs f and returns the largest live heap a garbage collection
// found while f ran, less the live heap before f. Collections are made
// frequent meanwhile (GOGC 5), and each one's reading is taken by a
// finalizer armed again after every cycle: the figure counts what was
// reachable, whatever the machine's load, and can only miss part of a
// peak (a lower bound), never add to one.
func peakLive(f func()) int64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	runtime.GC()
	before := live()
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	var peak atomic.Int64
	var stop atomic.Bool
	done := make(chan struct{})
	var arm func()
	arm = func() {
		// Larger than the tiny allocator's blocks, so it is freed alone.
		sentinel := new([64]byte)
		runtime.SetFinalizer(sentinel, func(*[64]byte) {
			peak.Store(max(peak.Load(), live()))
			if stop.Load() {
				close(done)
				return
			}
			arm()
		})
	}
	arm()
	f()
	stop.Store(true)
	runtime.GC()
	<-done
	return peak.Load() - before
}

// scopeRules are the rules of scopes each delivering the services
// matching its glob to the nodes of the cluster of its name.
func scopeRules(t testing.TB, globs map[string]string) *translate.Scopes {
	t.Helper()
	var rules []translate.Scope
	for _, name := range slices.Sorted(maps.Keys(globs)) {
		rules = append(rules, translate.Scope{
			Name: name, Node: translate.NodeMatch{Cluster: name},
			Services: []sources.Selector{{Services: []string{globs[name]}}},
		})
	}
	s, err := translate.NewScopes(rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rescoped is a publisher on an engine serving n services (with gRPC's
// listener and route each) under one scope delivering them all.
func rescoped(t testing.TB, n int) (*publisher, *xds.Server) {
	t.Helper()
	srv := xds.NewServer(xds.Options{})
	p := newPublisher(srv, true, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	p.scope(scopeRules(t, map[string]string{"edge": "svc-*"}))
	p.publish(manager.Changes{Upserted: manyServices(n)})
	if got := srv.Resources(); got != int64(4*n) {
		t.Fatalf("the engine serves %d resources, want %d", got, 4*n)
	}
	return p, srv
}

// TestRescopeHoldsOneServiceAtATime: a reload that changes the scopes of
// every service builds each service's resources and hands them to the
// engine's batch, which keeps their encoding, before it builds the next:
// at its peak the rescope holds the encodings of the change (as a first
// publish does), not the messages of every service at once, which were
// several times their size. Measured as the live heap the rescope adds at
// its peak, per service.
func TestRescopeHoldsOneServiceAtATime(t *testing.T) {
	const n = 5000
	p, srv := rescoped(t, n)
	// A second scope delivering every service: each one's scopes change.
	peak := peakLive(func() { p.scope(scopeRules(t, map[string]string{"edge": "svc-*", "mesh": "svc-*"})) })
	runtime.KeepAlive(p)
	if got := srv.Resources(); got != int64(4*n) {
		t.Fatalf("after the rescope the engine serves %d resources, want %d", got, 4*n)
	}
	t.Logf("the rescope of %d services added %d KB at its peak (%d B per service)", n, peak>>10, peak/n)
	// What remains is the change's entries (each of a service's resources
	// marshalled, and its cluster's gRPC variant), the list of the
	// services and the engine's bookkeeping of the change; every message
	// held at once was as much again and more.
	if per := peak / n; per > 4096 {
		t.Fatalf("the rescope held %d B per service at its peak, want at most 4096 (its resources' encodings)", per)
	}
}

// BenchmarkRescope reports the live heap a rescope of 100,000 services,
// half of which leave their scope, adds at its peak (peak-MB; see
// peakLive), each run on a new engine.
//
//	go test -run '^$' -bench Rescope -benchtime 1x -count 3 ./bridge/
func BenchmarkRescope(b *testing.B) {
	const n = 100000
	for range b.N {
		b.StopTimer()
		p, _ := rescoped(b, n)
		next := scopeRules(b, map[string]string{"edge": "svc-*[02468]"})
		b.StartTimer()
		peak := peakLive(func() { p.scope(next) })
		b.ReportMetric(float64(peak)/1e6, "peak-MB")
		b.ReportMetric(float64(peak)/n, "peak-B/service")
		runtime.KeepAlive(p)
	}
}

// TestRescopeLeavesOutUnchangedServices: a rescope applies, in one
// change, the services whose scopes change and leaves out those whose
// scopes stay (their resources are served as they would be built); a
// listener of the listener side named like a service whose scopes stay
// still gets its new scopes, with the service's gRPC listener as its
// variant.
func TestRescopeLeavesOutUnchangedServices(t *testing.T) {
	rec := &recorder{}
	p := newPublisher(rec, true, slog.New(slog.DiscardHandler), prometheus.NewRegistry()).
		envoy(edgeRoutes(t), []config.Listener{edgeListener(t, "api")}).
		scope(scopeRules(t, map[string]string{"edge": "web"}))
	p.publish(manager.Changes{Upserted: []sources.Service{service("api", "10.0.0.1"), service("web", "10.0.0.2")}})
	p.scope(scopeRules(t, map[string]string{"edge": "web", "mesh": "web"}))
	if len(rec.calls) != 2 {
		t.Fatalf("%d Apply calls, want 2 (the publish, the rescope)", len(rec.calls))
	}
	both := xds.ScopeSet(0).With(1).With(2)
	for _, typ := range []string{resource.ClusterType, resource.EndpointType} {
		if r, ok := find(t, rec, typ, "web"); !ok || r.Scopes != both {
			t.Errorf("%s web in the rescope: %v (found %v), want scopes %v", typ, r.Scopes, ok, both)
		}
		if _, ok := find(t, rec, typ, "api"); ok {
			t.Errorf("%s api, whose scopes stay, is in the rescope", typ)
		}
	}
	if l, ok := find(t, rec, resource.ListenerType, "api"); !ok || l.Scopes != both || l.GRPC == nil {
		t.Errorf("listener api in the rescope: %+v (found %v), want scopes %v and the service's gRPC listener", l, ok, both)
	}
	if _, ok := find(t, rec, resource.RouteType, "api"); ok {
		t.Error("the gRPC route configuration of api, whose scopes stay, is in the rescope")
	}
}
