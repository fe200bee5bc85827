package wire

import (
	"maps"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

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
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &Inbound{msg: r, ctx: t.Context(), admit: NewBudget(1 << 20)}); err != nil {
				t.Fatal(err)
			}
			lists = append(lists, r.ResourceNamesSubscribe)
		}
		if &lists[1][0] != &lists[2][0] || !IsShared(lists[1]) || IsShared(lists[0]) {
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
	in := &Inbound{msg: got}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, in); err != nil {
		t.Fatal(err)
	}
	if in.initialN != 100 || len(got.InitialResourceVersions) != 0 {
		t.Fatalf("kept %d records and decoded %d map entries, want 100 records and no map",
			in.initialN, len(got.InitialResourceVersions))
	}
	if iv := InitialOf(got, in); !maps.Equal(iv.Lookup(), sent.InitialResourceVersions) {
		t.Fatalf("initial versions read back as %v", iv.Lookup())
	}
	plain := &discoveryv3.DeltaDiscoveryRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, plain); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(plain.InitialResourceVersions, sent.InitialResourceVersions) {
		t.Fatalf("decoded outside a stream: %d map entries, want %d", len(plain.InitialResourceVersions), 100)
	}
}
