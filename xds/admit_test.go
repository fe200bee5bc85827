package xds

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
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

func queued(b *budget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// TestRequestBudgetBoundsStorm checks that large requests are admitted
// within the request budget before they are decoded: with the server not
// yet ready, admitted requests wait for readiness holding their share, so
// of ten reconnects exactly as many as fit are admitted and the rest wait
// undecoded; once the server is ready every one is answered and the budget
// is free again.
func TestRequestBudgetBoundsStorm(t *testing.T) {
	const n = 2000
	size := proto.Size(reconnectReq(n))
	if size < smallRequest {
		t.Fatalf("test request of %d bytes is small", size)
	}
	s := NewServer(Options{RequestBudget: size*2 + size/2}) // room for two
	cc := serve(t, s)
	var streams []*delta
	for range 10 {
		st := openDeltaADS(t, cc)
		st.send(reconnectReq(n))
		streams = append(streams, st)
	}
	waitFor(t, func() bool { return queued(s.admit) == 8 })
	if used := s.admit.inUse(); used != int64(2*size) {
		t.Fatalf("%d bytes admitted, want two requests (%d)", used, 2*size)
	}
	s.Apply(services(n), nil)
	for i, st := range streams {
		if r := st.recv(); len(r.Resources) != n {
			t.Fatalf("stream %d: %d clusters, want %d", i, len(r.Resources), n)
		}
	}
	waitFor(t, func() bool { return s.admit.inUse() == 0 })
}

// TestRequestBudgetSmallBypass checks that while large requests wait for
// the request budget, a small request is handled at once; that a waiting
// stream whose client leaves stops waiting; and that a request larger than
// the whole budget is admitted alone.
func TestRequestBudgetSmallBypass(t *testing.T) {
	const n = 2000
	size := proto.Size(reconnectReq(n))
	s := NewServer(Options{RequestBudget: size / 2})
	s.Apply(services(n), nil)
	cc := serve(t, s)
	held, err := s.admit.acquire(context.Background(), size)
	if err != nil {
		t.Fatal(err)
	}
	large := openDeltaADS(t, cc)
	large.send(reconnectReq(n))
	waitFor(t, func() bool { return queued(s.admit) == 1 })

	small := openDeltaADS(t, cc)
	small.send(deltaReq(ClusterType, svcName(0)))
	wantNames(t, deltaNames(small.recv()), svcName(0))

	ctx, cancel := context.WithCancel(context.Background())
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(reconnectReq(n)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return queued(s.admit) == 2 })
	cancel()
	waitFor(t, func() bool { return queued(s.admit) == 1 && len(s.Clients()) == 2 })

	large.none(50 * time.Millisecond)
	held.release()
	if r := large.recv(); len(r.Resources) != n {
		t.Fatalf("%d clusters, want %d", len(r.Resources), n)
	}
	waitFor(t, func() bool { return s.admit.inUse() == 0 })
}

// TestCodecKeepsInitialVersions checks that a stream reader's delta request
// keeps its initial versions as records, not a map, and that they read
// back as the map sent; a request decoded outside a stream gets its map.
func TestCodecKeepsInitialVersions(t *testing.T) {
	sent := reconnectReq(100)
	b, err := proto.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	c := Codec()
	got := &discoveryv3.DeltaDiscoveryRequest{}
	in := &inbound{msg: got}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, in); err != nil {
		t.Fatal(err)
	}
	if in.initialN != 100 || len(got.InitialResourceVersions) != 0 {
		t.Fatalf("kept %d records and decoded %d map entries, want 100 records and no map",
			in.initialN, len(got.InitialResourceVersions))
	}
	if iv := initialOf(got, in); !maps.Equal(iv.lookup(), sent.InitialResourceVersions) {
		t.Fatalf("initial versions read back as %v", iv.lookup())
	}
	plain := &discoveryv3.DeltaDiscoveryRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, plain); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(plain.InitialResourceVersions, sent.InitialResourceVersions) {
		t.Fatalf("decoded outside a stream: %d map entries, want %d", len(plain.InitialResourceVersions), 100)
	}
}
