package bridge

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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

// rescoped is a publisher on an engine serving n services (with gRPC's
// listener and route each) under one scope's rules, and the rules of a
// rescope that moves half the services out of that scope.
func rescoped(t testing.TB, n int) (*publisher, *xds.Server, *translate.Scopes) {
	t.Helper()
	scopes := func(services ...string) *translate.Scopes {
		s, err := translate.NewScopes([]translate.Scope{{
			Name: "edge", Node: translate.NodeMatch{Cluster: "edge"},
			Services: []sources.Selector{{Services: services}},
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	srv := xds.NewServer(xds.Options{})
	p := newPublisher(srv, true, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	p.scope(scopes("svc-*"))
	p.publish(manager.Changes{Upserted: manyServices(n)})
	if got := srv.Resources(); got != int64(4*n) {
		t.Fatalf("the engine serves %d resources, want %d", got, 4*n)
	}
	return p, srv, scopes("svc-*[02468]")
}

// TestRescopeHoldsOneServiceAtATime: a reload that changes the scoping
// rules builds each service's resources and hands them to the engine's
// batch, which keeps their encoding, before it builds the next: at its
// peak the rescope holds the encodings of the change (as the first
// publish does) and not the messages of every service at once, which
// were several times their size. Measured as the live heap the rescope
// adds at its peak, per service.
func TestRescopeHoldsOneServiceAtATime(t *testing.T) {
	const n = 5000
	p, srv, next := rescoped(t, n)
	peak := peakLive(func() { p.scope(next) })
	runtime.KeepAlive(p)
	if got := srv.Resources(); got != int64(4*n) {
		t.Fatalf("after the rescope the engine serves %d resources, want %d", got, 4*n)
	}
	t.Logf("the rescope of %d services added %d KB at its peak (%d B per service)", n, peak>>10, peak/n)
	// What remains is the change's encodings (four resources a service,
	// a few hundred bytes each), the services' list and the engine's
	// bookkeeping of the change; every message held at once was more than
	// twice that.
	if per := peak / n; per > 4096 {
		t.Fatalf("the rescope held %d B per service at its peak, want at most 4096 (its resources' encodings)", per)
	}
}

// BenchmarkRescope reports the live heap a rescope of 100,000 services
// adds at its peak (peak-MB; see peakLive), each run on a new engine.
//
//	go test -run '^$' -bench Rescope -benchtime 1x -count 3 ./bridge/
func BenchmarkRescope(b *testing.B) {
	const n = 100000
	for range b.N {
		b.StopTimer()
		p, _, next := rescoped(b, n)
		b.StartTimer()
		peak := peakLive(func() { p.scope(next) })
		b.ReportMetric(float64(peak)/1e6, "peak-MB")
		b.ReportMetric(float64(peak)/n, "peak-B/service")
		runtime.KeepAlive(p)
	}
}
