package xds

import (
	"context"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
)

// TestFullStateSharesChunkRecords: a full-state SotW response (here an MCP
// collection, as istiod subscribes to it) is sent a chunk of records at a
// time, the same buffers for every client, and a change of one resource
// makes the next response rebuild only the chunk that holds it: every
// other buffer is the very one the previous response sent. The bytes are
// those of the message the response stands for.
func TestFullStateSharesChunkRecords(t *testing.T) {
	const typ, n = "networking.istio.io/v1/ServiceEntry", 1000
	s := NewServer(Options{Collections: []string{typ}})
	entry := func(i int, timeout time.Duration) Resource {
		r := cluster(svcName(i), timeout)
		r.Type = typ
		return r
	}
	var rs []Resource
	for i := range n {
		rs = append(rs, entry(i, time.Second))
	}
	s.Apply(rs, nil)

	connect := func() *client {
		c, r := s.connect(context.Background(), "sotw_ads", false)
		if r != nil {
			t.Fatal(r)
		}
		t.Cleanup(func() { s.disconnect(c) })
		c.onSotW("", &discoveryv3.DiscoveryRequest{Node: fleetNode(0), TypeUrl: typ})
		return c
	}
	// push takes c's next response, checks it decodes to the whole
	// collection and returns its buffers.
	push := func(c *client) mem.BufferSlice {
		t.Helper()
		o := owed(c)
		if o == nil {
			t.Fatal("nothing owed")
		}
		if list, _, _ := wireOf(t, o.msg); len(list) != n || o.resources != n {
			t.Fatalf("a response of %d (%d) resources, want %d", len(list), o.resources, n)
		}
		if o2 := owed(c); o2 != nil {
			t.Fatalf("a second response owed: %d resources", o2.resources)
		}
		return o.msg.Buffers()
	}
	chunks := (n + chunkLen - 1) / chunkLen
	a, b := connect(), connect()
	first, other := push(a), push(b)
	if len(first) != chunks+2 {
		t.Fatalf("the initial response is %d buffers, want a chunk's records each (%d) and the envelope's two", len(first), chunks+2)
	}
	for i := 1; i <= chunks; i++ {
		if !sameBytes(first[i], other[i]) {
			t.Fatalf("buffer %d differs between two clients: each chunk's records are encoded once", i)
		}
	}

	s.Apply([]Resource{entry(n/2, 2*time.Second)}, nil)
	next := push(a)
	changed := 0
	for i := 1; i <= chunks; i++ {
		if !sameBytes(first[i], next[i]) {
			changed++
		}
	}
	if changed != 1 || len(next) != chunks+2 {
		t.Fatalf("after one change, %d of %d chunk buffers (of %d) were rebuilt, want 1", changed, chunks, len(next)-2)
	}
	if !sameBytes(next[1+n/2/chunkLen], push(b)[1+n/2/chunkLen]) {
		t.Fatal("the rebuilt chunk differs between two clients")
	}
}

// sameBytes reports whether a and b are the very same bytes in memory.
func sameBytes(a, b mem.Buffer) bool {
	x, y := a.ReadOnlyData(), b.ReadOnlyData()
	return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
}
