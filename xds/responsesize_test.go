package xds

import (
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// bigAssignments are n assignments of about 900 bytes each (40 endpoints).
func bigAssignments(n int) ([]Resource, []string) {
	ports := make([]uint32, 40)
	for i := range ports {
		ports[i] = uint32(20000 + i)
	}
	var rs []Resource
	var names []string
	for i := range n {
		rs = append(rs, assignment(svcName(i), ports...))
		names = append(names, svcName(i))
	}
	return rs, names
}

// TestResponsesSplitUnderLimit checks that an initial state larger than
// MaxResponseBytes arrives, in delta and in SotW EDS, as several responses
// that each fit, that together carry every resource once, and that a client
// whose receive limit is MaxResponseBytes gets them all.
func TestResponsesSplitUnderLimit(t *testing.T) {
	const limit = 8 << 10
	s := NewServer(Options{MaxResponseBytes: limit})
	rs, all := bigAssignments(60) // ~54 KB: at least 7 responses
	s.Apply(rs, nil)
	cc := dial(t, listen(t, s), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit)))

	slices.Sort(all)
	// receive reads responses until every name arrived, checking each
	// response's size; next returns a response's names and ACKs it.
	receive := func(t *testing.T, next func() ([]string, proto.Message)) {
		t.Helper()
		var got []string
		responses := 0
		for len(got) < len(all) {
			ns, r := next()
			got = append(got, ns...)
			responses++
			if n := proto.Size(r); n > limit {
				t.Errorf("a response of %d bytes, over the limit %d", n, limit)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, all) {
			t.Fatalf("got %d names %v, want the %d assignments once each", len(got), got, len(all))
		}
		if responses < 7 {
			t.Errorf("%d responses, want the state split in at least 7", responses)
		}
	}
	t.Run("delta", func(t *testing.T) {
		st := openDeltaADS(t, cc)
		st.send(deltaReq(EndpointType, all...))
		receive(t, func() ([]string, proto.Message) {
			r := st.recv()
			st.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
			return deltaNames(r), r
		})
		st.none(100 * time.Millisecond)
	})
	t.Run("sotw", func(t *testing.T) {
		st := openADS(t, cc)
		st.send(req(EndpointType, all...))
		receive(t, func() ([]string, proto.Message) {
			r := st.recv()
			st.send(ack(r, all...))
			return names(t, r), r
		})
		st.none(100 * time.Millisecond)
	})
}

// TestOversizeResourceRefused checks that a resource too large for any
// response is refused by Apply (reported to OnRefused), and that its name
// keeps serving the last good version.
func TestOversizeResourceRefused(t *testing.T) {
	const limit = 8 << 10
	var refused []Key
	s := NewServer(Options{MaxResponseBytes: limit, OnRefused: func(k Key, err error) {
		if err == nil {
			t.Error("OnRefused without an error")
		}
		refused = append(refused, k)
	}})
	good := assignment("a", 80)
	s.Apply([]Resource{good}, nil)
	huge := make([]uint32, 1000) // ~22 KB
	for i := range huge {
		huge[i] = uint32(1000 + i)
	}
	s.Apply([]Resource{assignment("a", huge...), assignment("b", 81)}, nil)
	if want := []Key{{EndpointType, "a"}}; !slices.Equal(refused, want) {
		t.Fatalf("refused %v, want %v", refused, want)
	}
	st := openDeltaADS(t, serve(t, s))
	st.send(deltaReq(EndpointType, "a", "b"))
	r := st.recv()
	wantNames(t, deltaNames(r), "a", "b")
	for _, x := range r.Resources {
		if x.Name == "a" && x.Resource.Value != nil && len(x.Resource.Value) > limit {
			t.Errorf("the refused version of a was served (%d bytes)", len(x.Resource.Value))
		}
	}
	if e, _ := newEntry(good); s.types[EndpointType].slots["a"].cur.version != e.version {
		t.Error("a does not keep its last good version")
	}
}

// TestFullStateNotSplit checks that a SotW CDS response over the limit is
// sent whole (it cannot be split) and counted.
func TestFullStateNotSplit(t *testing.T) {
	s := NewServer(Options{MaxResponseBytes: 2 << 10})
	s.Apply(services(100), nil) // 100 clusters of ~30 bytes
	st := openADS(t, serve(t, s))
	st.send(req(ClusterType))
	if r := st.recv(); len(r.Resources) != 100 {
		t.Fatalf("CDS response with %d clusters, want all 100 at once", len(r.Resources))
	}
	if n := counter(t, s.size.oversize.WithLabelValues("cluster")); n != 1 {
		t.Errorf("%v oversize CDS responses counted, want 1", n)
	}
}
