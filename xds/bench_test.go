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
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// Benchmarks of the steady-state scenario (S1 in docs/benchmarks.md): C
// clients each subscribed to N assignments of 10 endpoints; every op
// changes one endpoint of one assignment and waits until every client has
// been sent the change.
//
// BenchmarkApply drives the engine with in-process clients: the writer's
// send encodes the response exactly as gRPC does with Codec (and counts its
// bytes)
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
	b.Helper()
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

// benchCase is one benchmark shape.
type benchCase struct {
	clients, names int
	delta          bool
}

// runCases runs bench as a sub-benchmark per case.
func runCases(b *testing.B, cases []benchCase, bench func(b *testing.B, nc, n int, delta bool)) {
	b.Helper()
	for _, tc := range cases {
		proto := map[bool]string{false: "sotw", true: "delta"}[tc.delta]
		b.Run(fmt.Sprintf("%s/C=%d/N=%d", proto, tc.clients, tc.names), func(b *testing.B) {
			bench(b, tc.clients, tc.names, tc.delta)
		})
	}
}

// benchRig is an engine holding n services, with a count of the responses
// the clients still have to receive before a step is done.
type benchRig struct {
	s       *Server
	all     []string // every assignment name
	nc      int
	base    uint64 // heap before the clients connected
	pending atomic.Pointer[sync.WaitGroup]
	bytes   atomic.Int64 // response bytes sent during the timed changes
}

// newBenchRig expects the initial response of each of nc clients.
func newBenchRig(nc, n int) *benchRig {
	r := &benchRig{s: NewServer(Options{}), nc: nc}
	r.s.Apply(benchServices(n), nil)
	r.all = make([]string, n)
	for i := range r.all {
		r.all[i] = svcName(i)
	}
	r.base = heapInUse()
	initial := &sync.WaitGroup{}
	initial.Add(nc)
	r.pending.Store(initial)
	return r
}

// done counts a response received by one client.
func (r *benchRig) done() {
	if wg := r.pending.Load(); wg != nil {
		wg.Done()
	}
}

// run waits for the initial responses, then times b.N single-endpoint
// changes, each until every client has received it. It returns the heap the
// engine holds per client and the CPU time of the changes.
func (r *benchRig) run(b *testing.B) (heapPerClient float64, cpu time.Duration) {
	b.Helper()
	r.pending.Load().Wait()
	heapPerClient = float64(heapInUse()-r.base) / float64(r.nc)
	changes := benchChanges(b, len(r.all))
	r.bytes.Store(0)
	b.ResetTimer()
	cpu0 := cpuNow()
	for i := range b.N {
		wg := &sync.WaitGroup{}
		wg.Add(r.nc)
		r.pending.Store(wg)
		r.s.Apply(changes[i], nil)
		wg.Wait()
	}
	cpu = cpuNow() - cpu0
	b.StopTimer()
	return heapPerClient, cpu
}

func BenchmarkApply(b *testing.B) {
	runCases(b, []benchCase{
		{1000, 1000, false},
		{1000, 1000, true},
		{200, 100, false},
		{200, 10000, false},
	}, benchEngine)
}

func benchEngine(b *testing.B, nc, n int, delta bool) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var writers []*writer
	defer func() {
		cancel()
		for _, w := range writers {
			_ = w.stop()
		}
	}()

	r := newBenchRig(nc, n)
	s, all := r.s, r.all
	codec := wire.Codec()
	// wireBytes encodes o as gRPC does with Codec and copies the bytes
	// once, as the transport does into its frames.
	wireBytes := func(o *outbound) error {
		bs, err := codec.Marshal(o.msg)
		if err != nil {
			return err
		}
		buf := bs.MaterializeToBuffer(mem.DefaultBufferPool())
		r.bytes.Add(int64(buf.Len()))
		buf.Free()
		return nil
	}
	for i := range nc {
		c, _ := s.connect(ctx, "bench", delta)
		var send func(*outbound) error
		if delta {
			send = func(o *outbound) error {
				err := wireBytes(o)
				env := o.msg.(*deltaMsg).env
				c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: env.TypeURL, ResponseNonce: env.Nonce}, nil)
				r.done()
				return err
			}
			c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: all}, nil)
		} else {
			send = func(o *outbound) error {
				err := wireBytes(o)
				env := o.msg.(*sotwMsg).env
				c.onSotW("", &discoveryv3.DiscoveryRequest{TypeUrl: env.TypeURL, VersionInfo: env.Version, ResponseNonce: env.Nonce, ResourceNames: all})
				r.done()
				return err
			}
			c.onSotW("", &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprint("c", i)}, TypeUrl: EndpointType, ResourceNames: all})
		}
		w := c.startWriter(ctx, cancel, send)
		writers = append(writers, w)
	}
	b.ReportAllocs()
	perClient, cpu := r.run(b)
	perOp := float64(b.N * nc)
	b.ReportMetric(float64(cpu.Nanoseconds())/perOp/1e3, "cpu-µs/client·change")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perOp/1e3, "wall-µs/client·change")
	b.ReportMetric(float64(r.bytes.Load())/perOp, "B/client·change")
	b.ReportMetric(perClient/1024, "heap-KB/client")
}

func BenchmarkApplyGRPC(b *testing.B) {
	runCases(b, []benchCase{
		{200, 1000, false},
		{200, 1000, true},
	}, benchGRPC)
}

func benchGRPC(b *testing.B, nc, n int, delta bool) {
	b.Helper()
	r := newBenchRig(nc, n)
	all := r.all
	addr := listen(b, r.s)
	for range nc {
		cc := dial(b, addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
		if delta {
			st := openDeltaADS(b, cc)
			st.send(deltaReq(EndpointType, all...))
			go func() { // ends with the stream (cleanup)
				for resp := range st.resp {
					_ = st.st.Send(deltaAck(resp))
					r.done()
				}
			}()
			continue
		}
		st := openADS(b, cc)
		st.send(req(EndpointType, all...))
		go func() { // ends with the stream (cleanup)
			for resp := range st.resp {
				_ = st.st.Send(ack(resp, all...))
				r.done()
			}
		}()
	}
	perClient, cpu := r.run(b)
	perOp := float64(b.N * nc)
	b.ReportMetric(float64(cpu.Nanoseconds())/perOp/1e3, "cpu-µs/client·change")
	b.ReportMetric(perClient/1024, "heap-KB/client")
}
