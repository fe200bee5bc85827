package xds

import (
	"context"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// reconnectReq is a delta CDS request of a reconnecting Envoy that claims
// to hold n clusters, each at a version the server does not have: large
// on the wire (above smallRequest for n >= 1,500) and answered with every
// cluster.
func reconnectReq(n int) *discoveryv3.DeltaDiscoveryRequest {
	r := deltaReq(ClusterType)
	r.InitialResourceVersions = make(map[string]string, n)
	for i := range n {
		r.InitialResourceVersions[svcName(i)] = strings.Repeat("v", 40)
	}
	return r
}

func queued(b *wire.Budget) int { return b.Waiting() }

// TestRequestBudgetBoundsStorm checks that a storm of large requests is
// read and decoded within the request budget: with the server not yet
// ready, admitted requests wait for readiness holding their share, so of
// twelve reconnects two are admitted, as many more as there are leases are
// read and wait for the budget, and the others are not read (their first
// reads wait for a lease); once the server is ready every one is answered
// and the budget and leases are free again.
func TestRequestBudgetBoundsStorm(t *testing.T) {
	const n = 2000
	size := proto.Size(reconnectReq(n))
	if size < wire.SmallRequest {
		t.Fatalf("test request of %d bytes is small", size)
	}
	budget := size*2 + size/2 // room for two
	s := NewServer(Options{RequestBudget: budget})
	leases := s.reads.Leases()
	if want := max(budget/wire.LeaseBytes, 1); leases != want || leases > 8 {
		t.Fatalf("%d leases, want %d", leases, want)
	}
	cc := serve(t, s)
	var streams []*delta
	for range 12 {
		st := openDeltaADS(t, cc)
		st.send(reconnectReq(n))
		streams = append(streams, st)
	}
	waitFor(t, func() bool { return queued(s.requestBudget) == leases })
	if used := s.requestBudget.InUse(); used != int64(2*size) {
		t.Fatalf("%d bytes admitted, want two requests (%d)", used, 2*size)
	}
	if held := s.reads.Held(); held != leases {
		t.Fatalf("%d leases held, want the %d of the queued requests", held, leases)
	}
	s.Apply(services(n), nil)
	for i, st := range streams {
		if r := st.recv(); len(r.Resources) != n {
			t.Fatalf("stream %d: %d clusters, want %d", i, len(r.Resources), n)
		}
	}
	waitFor(t, func() bool { return s.requestBudget.InUse() == 0 && s.reads.Held() == 0 })
}

// TestRequestBudgetSmallBypass checks that while large requests wait for
// the request budget, a small request of a stream already served is
// handled at once; that a waiting stream whose client leaves stops
// waiting; and that a request larger than the whole budget is admitted
// alone.
func TestRequestBudgetSmallBypass(t *testing.T) {
	const n = 2000
	size := proto.Size(reconnectReq(n))
	s := NewServer(Options{RequestBudget: size / 2})
	s.Apply(services(n), nil)
	cc := serve(t, s)
	small := openDeltaADS(t, cc)
	small.send(deltaReq(ClusterType, svcName(0)))
	wantNames(t, deltaNames(small.recv()), svcName(0))

	held, err := s.requestBudget.Acquire(context.Background(), size, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(reconnectReq(n)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return queued(s.requestBudget) == 1 })
	small.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResourceNamesSubscribe: []string{svcName(1)}})
	wantNames(t, deltaNames(small.recv()), svcName(1))
	cancel()
	waitFor(t, func() bool { return queued(s.requestBudget) == 0 && len(s.Clients()) == 1 && s.reads.Held() == 0 })

	large := openDeltaADS(t, cc)
	large.send(reconnectReq(n))
	waitFor(t, func() bool { return queued(s.requestBudget) == 1 })
	large.none(50 * time.Millisecond)
	held.Release()
	if r := large.recv(); len(r.Resources) != n {
		t.Fatalf("%d clusters, want %d", len(r.Resources), n)
	}
	waitFor(t, func() bool { return s.requestBudget.InUse() == 0 })
}

// TestFirstReadLeaseLapses checks that a stream that opens and sends
// nothing holds its lease only for leaseTime: the next stream is then
// read and answered.
func TestFirstReadLeaseLapses(t *testing.T) {
	s := NewServer(Options{RequestBudget: wire.SmallRequest}) // one lease
	s.Apply(services(1), nil)
	cc := serve(t, s)
	idle := openDeltaADS(t, cc)
	_ = idle
	waitFor(t, func() bool { return s.reads.Held() == 1 })
	began := time.Now()
	next := openDeltaADS(t, cc)
	next.send(deltaReq(ClusterType, svcName(0)))
	wantNames(t, deltaNames(next.recv()), svcName(0))
	if d := time.Since(began); d < wire.LeaseTime/2 {
		t.Fatalf("answered after %s: the idle stream's lease did not hold", d)
	}
}

// rawCodec sends a test's bytes as they are, whatever they decode to.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestRequestBudgetReturnsAfterFailures checks that every way a stream can
// end gives its lease and its share of the request budget back: a large
// request that is admitted and then fails to decode, a stream closed
// before it sent anything, and a served reconnect whose client leaves.
// After many of each, nothing is held.
func TestRequestBudgetReturnsAfterFailures(t *testing.T) {
	const n = 2000
	good, err := proto.Marshal(reconnectReq(n))
	if err != nil {
		t.Fatal(err)
	}
	bad := good[:len(good)-1] // the last record cut short: admitted, then refused by the decoder
	if len(bad) < wire.SmallRequest {
		t.Fatalf("test request of %d bytes is small", len(bad))
	}
	s := NewServer(Options{RequestBudget: 2*len(good) + len(good)/2})
	s.Apply(services(n), nil)
	cc := serve(t, s)
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	const method = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
	for range 20 {
		st, err := cc.NewStream(context.Background(), desc, method, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(bad); err != nil {
			t.Fatal(err)
		}
		var reply []byte
		if err := st.RecvMsg(&reply); status.Code(err) == codes.OK {
			t.Fatal("a truncated request was answered")
		}

		ctx, cancel := context.WithCancel(context.Background())
		if _, err := cc.NewStream(ctx, desc, method); err != nil {
			t.Fatal(err)
		}
		cancel() // gone before its first request

		// Bounded, so that a budget or lease not given back fails the
		// test here rather than hanging it.
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		ok, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ok.Send(reconnectReq(n)); err != nil {
			t.Fatal(err)
		}
		if r, err := ok.Recv(); err != nil || len(r.Resources) != n {
			t.Fatalf("reconnect answered with %d clusters (%v), want %d", len(r.GetResources()), err, n)
		}
		cancel()
	}
	waitFor(t, func() bool {
		return s.requestBudget.InUse() == 0 && s.reads.Held() == 0 && len(s.Clients()) == 0
	})
}
