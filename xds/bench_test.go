package xds

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// Benchmarks of issue 4's S1 shape: C clients each subscribed to N
// assignments of 10 endpoints; every op changes one endpoint of one
// assignment and waits until every client has been sent the change.
//
// BenchmarkApply drives the engine with in-process clients: the writer's
// send marshals the response exactly as gRPC would (and counts its bytes)
// and the client's ACK is handed straight to the request handler, so the
// figures are the engine's own cost without the HTTP/2 transport.
// BenchmarkApplyGRPC runs real streams over loopback; its CPU figure also
// contains the clients' side of the transport, in the same process.

func benchServices(n int) []Resource {
	var rs []Resource
	for i := range n {
		rs = append(rs, cluster(svcName(i), time.Second), benchAssignment(i, -1))
	}
	return rs
}

// benchAssignment is assignment i with 10 endpoints; round ≥ 0 moves the
// first endpoint to a port of that round.
func benchAssignment(i, round int) Resource {
	ports := make([]uint32, 10)
	for j := range ports {
		ports[j] = uint32(20000 + j)
	}
	if round >= 0 {
		ports[0] = uint32(30000 + round%30000)
	}
	return assignment(svcName(i), ports...)
}

// benchChanges are b.N single-endpoint changes spread over the n names.
func benchChanges(b *testing.B, n int) [][]Resource {
	changes := make([][]Resource, b.N)
	for i := range changes {
		changes[i] = []Resource{benchAssignment((i*7919)%n, i)}
	}
	return changes
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func BenchmarkApply(b *testing.B) {
	for _, tc := range []struct {
		clients, names int
		delta          bool
	}{
		{1000, 1000, false},
		{1000, 1000, true},
		{200, 100, false},
		{200, 10000, false},
	} {
		proto := map[bool]string{false: "sotw", true: "delta"}[tc.delta]
		b.Run(fmt.Sprintf("%s/C=%d/N=%d", proto, tc.clients, tc.names), func(b *testing.B) {
			benchEngine(b, tc.clients, tc.names, tc.delta)
		})
	}
}

func benchEngine(b *testing.B, nc, n int, delta bool) {
	ctx, cancel := context.WithCancel(context.Background())
	var writers sync.WaitGroup
	defer func() { cancel(); writers.Wait() }()

	s := NewServer(Options{})
	s.Apply(benchServices(n), nil)
	all := make([]string, n)
	for i := range all {
		all[i] = svcName(i)
	}
	base := heapInUse()

	var (
		pending atomic.Pointer[sync.WaitGroup]
		bytes   atomic.Int64
	)
	done := func() {
		if wg := pending.Load(); wg != nil {
			wg.Done()
		}
	}
	initial := &sync.WaitGroup{}
	initial.Add(nc)
	pending.Store(initial)
	for i := range nc {
		c := s.connect(ctx, "bench", delta)
		var send func(*out) error
		if delta {
			send = func(o *out) error {
				buf, err := proto.Marshal(o.delta)
				bytes.Add(int64(len(buf)))
				s.onDelta(c, "", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: o.delta.TypeUrl, ResponseNonce: o.delta.Nonce})
				done()
				return err
			}
			s.onDelta(c, "", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: all})
		} else {
			send = func(o *out) error {
				buf, err := proto.Marshal(o.sotw)
				bytes.Add(int64(len(buf)))
				s.onSotW(c, "", &discoveryv3.DiscoveryRequest{TypeUrl: o.sotw.TypeUrl, VersionInfo: o.sotw.VersionInfo, ResponseNonce: o.sotw.Nonce, ResourceNames: all})
				done()
				return err
			}
			s.onSotW(c, "", &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprint("c", i)}, TypeUrl: EndpointType, ResourceNames: all})
		}
		writers.Add(1)
		go func() { defer writers.Done(); _ = s.push(ctx, c, send) }()
	}
	initial.Wait()
	perClient := float64(heapInUse()-base) / float64(nc)

	changes := benchChanges(b, n)
	bytes.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuNow()
	for i := range b.N {
		wg := &sync.WaitGroup{}
		wg.Add(nc)
		pending.Store(wg)
		s.Apply(changes[i], nil)
		wg.Wait()
	}
	cpu := cpuNow() - cpu0
	b.StopTimer()
	perOp := float64(b.N * nc)
	b.ReportMetric(float64(cpu.Nanoseconds())/perOp/1e3, "cpu-µs/client·change")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perOp/1e3, "wall-µs/client·change")
	b.ReportMetric(float64(bytes.Load())/perOp, "B/client·change")
	b.ReportMetric(perClient/1024, "heap-KB/client")
}

func BenchmarkApplyGRPC(b *testing.B) {
	for _, tc := range []struct {
		clients, names int
		delta          bool
	}{
		{200, 1000, false},
		{200, 1000, true},
	} {
		proto := map[bool]string{false: "sotw", true: "delta"}[tc.delta]
		b.Run(fmt.Sprintf("%s/C=%d/N=%d", proto, tc.clients, tc.names), func(b *testing.B) {
			benchGRPC(b, tc.clients, tc.names, tc.delta)
		})
	}
}

func benchGRPC(b *testing.B, nc, n int, delta bool) {
	s := NewServer(Options{})
	s.Apply(benchServices(n), nil)
	all := make([]string, n)
	for i := range all {
		all[i] = svcName(i)
	}
	base := heapInUse()
	var pending atomic.Pointer[sync.WaitGroup]
	done := func() {
		if wg := pending.Load(); wg != nil {
			wg.Done()
		}
	}
	initial := &sync.WaitGroup{}
	initial.Add(nc)
	pending.Store(initial)
	lis := serveBench(b, s)
	for range nc {
		cc := dialBench(b, lis)
		if delta {
			st := openDeltaADS(b, cc)
			st.send(deltaReq(EndpointType, all...))
			go func() { // ends with the stream (cleanup)
				for r := range st.resp {
					_ = st.st.Send(deltaAck(r))
					done()
				}
			}()
			continue
		}
		st := openADS(b, cc)
		st.send(req(EndpointType, all...))
		go func() { // ends with the stream (cleanup)
			for r := range st.resp {
				_ = st.st.Send(ack(r, all...))
				done()
			}
		}()
	}
	initial.Wait()
	perClient := float64(heapInUse()-base) / float64(nc)
	changes := benchChanges(b, n)
	b.ResetTimer()
	cpu0 := cpuNow()
	for i := range b.N {
		wg := &sync.WaitGroup{}
		wg.Add(nc)
		pending.Store(wg)
		s.Apply(changes[i], nil)
		wg.Wait()
	}
	cpu := cpuNow() - cpu0
	b.StopTimer()
	perOp := float64(b.N * nc)
	b.ReportMetric(float64(cpu.Nanoseconds())/perOp/1e3, "cpu-µs/client·change")
	b.ReportMetric(perClient/1024, "heap-KB/client")
}
