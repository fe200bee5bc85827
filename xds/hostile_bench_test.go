package xds

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
)

// BenchmarkReconnect measures a delta EDS reconnect that lists every one of
// n names in both resource_names_subscribe and initial_resource_versions
// (what Envoy sends after a failover), nothing having changed: hold-ms is
// the time the request is handled (nearly all of it under Server.mu),
// apply-max-ms the slowest unrelated Apply that ran during it.
func BenchmarkReconnect(b *testing.B) {
	for _, n := range []int{2500, 10000, 20000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) { benchReconnect(b, n) })
	}
}

func benchReconnect(b *testing.B, n int) {
	b.Helper()
	s := NewServer(Options{})
	s.Apply(benchServices(n), nil)
	initial := make(map[string]string, n)
	s.mu.Lock()
	for name, sl := range s.types[EndpointType].slots {
		initial[name] = sl.cur.version
	}
	s.mu.Unlock()
	names := make([]string, 0, n)
	for name := range initial {
		names = append(names, name)
	}
	sort.Strings(names)
	reconnect := &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType,
		ResourceNamesSubscribe: names, InitialResourceVersions: initial}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var hold, applyMax time.Duration
	b.ResetTimer()
	for range b.N {
		c, _ := s.connect(ctx, "bench", true)
		stop, started, worst := make(chan struct{}), make(chan struct{}), make(chan time.Duration)
		go func() { // unrelated changes, back to back, during the reconnect
			var slowest time.Duration
			for k := 0; ; k++ {
				t0 := time.Now()
				s.Apply([]Resource{assignment("unrelated", uint32(1+k%2))}, nil)
				slowest = cmpMax(slowest, time.Since(t0))
				if k == 0 {
					close(started)
				}
				select {
				case <-stop:
					worst <- slowest
					return
				default:
				}
			}
		}()
		<-started
		t0 := time.Now()
		c.onDelta("", reconnect, nil)
		hold += time.Since(t0)
		close(stop)
		applyMax += <-worst
		s.disconnect(c)
	}
	b.StopTimer()
	b.ReportMetric(float64(hold.Microseconds())/1e3/float64(b.N), "hold-ms")
	b.ReportMetric(float64(applyMax.Microseconds())/1e3/float64(b.N), "apply-max-ms")
}

func cmpMax(a, b time.Duration) time.Duration {
	if b > a {
		return b
	}
	return a
}

// BenchmarkHostile runs 200 honest delta EDS clients over gRPC, each
// subscribed to every one of 100 assignments, while a hostile client
// reconnects over and over sending 20,000 invented names (subscribed and
// claimed in initial_resource_versions) and then 500 invented type URLs.
// Each op changes one assignment and waits until every honest client got
// it; p99-ms is the honest clients' change latency. After the hostile
// client has left, heap-MB is the heap held beyond the honest clients'
// baseline, and slots / types what the store still holds. With the default
// limits the hostile stream is refused at its 10,001st unknown name; with
// raised limits it is served in full (but for the 17th type URL on).
func BenchmarkHostile(b *testing.B) {
	b.Run("limits=default", func(b *testing.B) { benchHostile(b, Limits{}) })
	b.Run("limits=raised", func(b *testing.B) { benchHostile(b, Limits{UnknownNames: 40000}) })
}

func benchHostile(b *testing.B, limits Limits) {
	b.Helper()
	const honest, n = 200, 100
	s := NewServer(Options{Limits: limits})
	s.Apply(benchServices(n), nil)
	all := make([]string, n)
	for i := range all {
		all[i] = svcName(i)
	}
	addr := listen(b, s)

	var (
		pending atomic.Pointer[sync.WaitGroup]
		startNs atomic.Int64
		latMu   sync.Mutex
		lat     []time.Duration
	)
	initial := &sync.WaitGroup{}
	initial.Add(honest)
	pending.Store(initial)
	for range honest {
		cc := dial(b, addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
		st := openDeltaADS(b, cc)
		st.send(deltaReq(EndpointType, all...))
		go func() { // ends with the stream (cleanup)
			for resp := range st.resp {
				if ns := startNs.Load(); ns != 0 {
					d := time.Since(time.Unix(0, ns))
					latMu.Lock()
					lat = append(lat, d)
					latMu.Unlock()
				}
				_ = st.st.Send(deltaAck(resp))
				if wg := pending.Load(); wg != nil {
					wg.Done()
				}
			}
		}()
	}
	initial.Wait()
	base := heapInUse()

	ctx, cancel := context.WithCancel(context.Background())
	hostileDone := make(chan struct{})
	go func() {
		defer close(hostileDone)
		cc := dial(b, addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30), grpc.MaxCallSendMsgSize(1<<30)))
		for round := 0; ctx.Err() == nil; round++ {
			hostileRound(ctx, cc, round)
		}
	}()

	b.ResetTimer()
	for i := range b.N {
		wg := &sync.WaitGroup{}
		wg.Add(honest)
		pending.Store(wg)
		startNs.Store(time.Now().UnixNano())
		s.Apply([]Resource{benchAssignment(i%n, i)}, nil)
		wg.Wait()
	}
	b.StopTimer()
	startNs.Store(0)
	cancel()
	<-hostileDone
	waitFor(b, func() bool { return len(s.Clients()) == honest })

	heap := float64(int64(heapInUse())-int64(base)) / (1 << 20)
	s.mu.Lock()
	slots, types := 0, len(s.types)
	for _, t := range s.types {
		slots += len(t.slots)
	}
	s.mu.Unlock()
	latMu.Lock()
	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	latMu.Unlock()
	b.ReportMetric(float64(p99.Microseconds())/1e3, "p99-ms")
	b.ReportMetric(heap, "heap-MB")
	b.ReportMetric(float64(slots), "slots")
	b.ReportMetric(float64(types), "types")
}

// hostileRound opens one delta ADS stream, sends 20,000 invented names and
// 500 invented type URLs, and closes it once the server has read them all.
// Responses are read and dropped.
func hostileRound(ctx context.Context, cc *grpc.ClientConn, round int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
	const invented = 20000
	sub := make([]string, invented)
	claims := make(map[string]string, invented)
	for i := range sub {
		sub[i] = fmt.Sprintf("invented-%d-%d", round, i)
		claims[sub[i]] = "1"
	}
	_ = st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType,
		ResourceNamesSubscribe: sub, InitialResourceVersions: claims})
	for i := range 500 {
		if st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: fmt.Sprintf("type.example/invented.v%d.T%d", round, i),
			ResourceNamesSubscribe: []string{"x"}}) != nil {
			break
		}
	}
	// The server ends the stream once it has read everything sent.
	_ = st.CloseSend()
	<-done
}
