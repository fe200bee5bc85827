package xds

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = svcName(i)
	}
	return out
}

func decodeWith(t *testing.T, c *codec, b []byte) (*discoveryv3.DiscoveryRequest, error) {
	t.Helper()
	r := &discoveryv3.DiscoveryRequest{}
	err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, r)
	return r, err
}

func TestCodecDecodesRequests(t *testing.T) {
	c := Codec().(*codec)
	tests := []struct {
		name string
		req  *discoveryv3.DiscoveryRequest
	}{
		{"empty", &discoveryv3.DiscoveryRequest{}},
		{"no names", &discoveryv3.DiscoveryRequest{TypeUrl: ClusterType, VersionInfo: "3", ResponseNonce: "7"}},
		{"few names", &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "n"}, TypeUrl: EndpointType, ResourceNames: manyNames(3)}},
		{"many names", &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "n"}, TypeUrl: EndpointType, VersionInfo: "1", ResponseNonce: "2", ResourceNames: manyNames(500)}},
		{"nack", &discoveryv3.DiscoveryRequest{TypeUrl: EndpointType, ResourceNames: manyNames(40), ErrorDetail: &statuspb.Status{Code: 3, Message: "no"}}},
		{"empty name", &discoveryv3.DiscoveryRequest{ResourceNames: append(manyNames(20), "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := proto.Marshal(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second decode of a long list comes from the cache
				got, err := decodeWith(t, c, b)
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(got, tt.req) {
					t.Fatalf("got %v, want %v", got, tt.req)
				}
			}
		})
	}
}

func TestCodecDecodesDeltaRequests(t *testing.T) {
	c := Codec().(*codec)
	tests := []struct {
		name string
		req  *discoveryv3.DeltaDiscoveryRequest
	}{
		{"empty", &discoveryv3.DeltaDiscoveryRequest{}},
		{"ack", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResponseNonce: "7"}},
		{"first", &discoveryv3.DeltaDiscoveryRequest{
			Node: &corev3.Node{Id: "n"}, TypeUrl: EndpointType, ResourceNamesSubscribe: manyNames(500),
			ResourceNamesUnsubscribe: []string{"x"}, InitialResourceVersions: map[string]string{"svc-1": "v"},
		}},
		{"empty name", &discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: append(manyNames(20), "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := proto.Marshal(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second decode of a long list comes from the cache
				got := &discoveryv3.DeltaDiscoveryRequest{}
				if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(got, tt.req) {
					t.Fatalf("got %v, want %v", got, tt.req)
				}
			}
		})
	}
}

// TestCodecSharesDeltaSubscriptions: every client of a fleet sends the same
// first EDS subscription; the codec hands out one shared list for it from
// the second on, with or without initial versions beside it, and keeps
// nothing of a list seen once.
func TestCodecSharesDeltaSubscriptions(t *testing.T) {
	c := Codec().(*codec)
	for _, initial := range []map[string]string{nil, {"svc-1": "v"}} {
		b, _ := proto.Marshal(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesSubscribe: manyNames(100), InitialResourceVersions: initial})
		var lists [][]string
		for i := range 3 {
			if i == 1 && len(c.delta.m) != 0 {
				t.Fatalf("initial versions %v: a list seen once was cached", initial)
			}
			r := &discoveryv3.DeltaDiscoveryRequest{}
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &inbound{msg: r, ctx: t.Context(), admit: newBudget(1 << 20)}); err != nil {
				t.Fatal(err)
			}
			lists = append(lists, r.ResourceNamesSubscribe)
		}
		if &lists[1][0] != &lists[2][0] || !isShared(lists[1]) || isShared(lists[0]) {
			t.Errorf("initial versions %v: identical subscriptions were not shared from the second on", initial)
		}
		c.delta.m = map[uint64]*namesEntry{}
	}
}

func TestCodecSharesAndProtectsCachedNames(t *testing.T) {
	c := Codec().(*codec)
	b, _ := proto.Marshal(&discoveryv3.DiscoveryRequest{ResourceNames: manyNames(100)})
	_, _ = decodeWith(t, c, b) // seen once: not cached
	r1, _ := decodeWith(t, c, b)
	r2, _ := decodeWith(t, c, b)
	if &r1.ResourceNames[0] != &r2.ResourceNames[0] {
		t.Fatal("identical lists were not shared")
	}
	r1.ResourceNames = append(r1.ResourceNames, "extra") // must not write into the cache
	r3, _ := decodeWith(t, c, b)
	if len(r3.ResourceNames) != 100 || r3.ResourceNames[99] != "svc-99" {
		t.Fatalf("cache corrupted: %d names", len(r3.ResourceNames))
	}
}

func TestCodecEdgeCases(t *testing.T) {
	c := Codec().(*codec)
	name := func(b []byte, s string) []byte {
		b = protowire.AppendTag(b, fieldResourceNames, protowire.BytesType)
		return protowire.AppendString(b, s)
	}
	// Names interleaved with another field still decode (via proto).
	var b []byte
	b = name(b, "a")
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendString(b, ClusterType)
	b = name(b, "b")
	r, err := decodeWith(t, c, b)
	if err != nil || len(r.ResourceNames) != 2 || r.ResourceNames[1] != "b" || r.TypeUrl != ClusterType {
		t.Fatalf("interleaved: %v %v", r, err)
	}
	// Invalid UTF-8 is rejected, as proto3 requires.
	var bad []byte
	for i := range 20 {
		bad = name(bad, svcName(i))
	}
	bad = name(bad, "\xff\xfe")
	if _, err := decodeWith(t, c, bad); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
	// Truncated input is an error.
	good, _ := proto.Marshal(&discoveryv3.DiscoveryRequest{ResourceNames: manyNames(30)})
	if _, err := decodeWith(t, c, good[:len(good)-2]); err == nil {
		t.Fatal("truncated request accepted")
	}
}

// TestCodecServes runs a SotW client against a server using the codec.
func TestCodecServes(t *testing.T) {
	s := NewServer(Options{})
	f := serveFixture(t, s, services(50), grpc.ForceServerCodecV2(Codec()))
	c := f.client(variant{name: "sotw-codec"}, envoysim.Options{})
	f.converge(c)
	mark := len(c.Log())
	f.apply([]Resource{assignment("svc-7", 4)}, nil)
	f.converge(c)
	if got := received(c, mark, EndpointType); len(got) != 1 || len(got[0].Names) != 1 {
		t.Fatalf("after one change: %+v", got)
	}
	// The EDS name list (a shared one by now) changes both ways.
	f.apply(nil, []Key{{ClusterType, "svc-3"}, {EndpointType, "svc-3"}})
	f.converge(c)
	f.apply([]Resource{cluster("new", time.Second), assignment("new", 1)}, nil)
	f.converge(c)
	waitFor(t, func() bool { return subscribed(s, EndpointType) == 50 })
	mark = len(c.Log())
	f.apply([]Resource{assignment("svc-4", 4)}, nil)
	f.converge(c)
	if got := received(c, mark, EndpointType); len(got) != 1 || got[0].Names[0] != "svc-4" {
		t.Fatalf("after one change: %+v", got)
	}
}

// TestCodecDeltaListsKeepSotWLists: unique delta subscriptions, more than
// the cache holds, do not evict the SotW list a fleet's ACKs repeat.
func TestCodecDeltaListsKeepSotWLists(t *testing.T) {
	c := Codec().(*codec)
	b, _ := proto.Marshal(&discoveryv3.DiscoveryRequest{ResourceNames: manyNames(100)})
	_, _ = decodeWith(t, c, b) // seen once: not cached
	r1, _ := decodeWith(t, c, b)
	for i := range 2 * maxCacheEntries {
		d, _ := proto.Marshal(&discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: append(manyNames(20), svcName(1000+i))})
		for range 2 { // twice: cached
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(d)}, &discoveryv3.DeltaDiscoveryRequest{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	r2, _ := decodeWith(t, c, b)
	if &r1.ResourceNames[0] != &r2.ResourceNames[0] {
		t.Fatal("the SotW list was evicted by delta lists")
	}
}
