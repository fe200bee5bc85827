package xds

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// wireEntries are entries of every shape a response carries, built as the
// store builds them.
func wireEntries(t *testing.T) []*entry {
	t.Helper()
	var es []*entry
	for _, r := range []Resource{cluster("a", 1), assignment("a", 80, 81), assignment("ünïcode-b"), emptyAssignment("c").resource()} {
		e, err := newEntry(r)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// resource gives back the Resource an entry was built from (tests only).
func (e *entry) resource() Resource {
	m, err := e.any.UnmarshalNew()
	if err != nil {
		panic(err)
	}
	return Resource{Type: e.any.TypeUrl, Name: e.name, Message: m}
}

// TestWireDecodesAsMarshal checks that the responses assembled from the
// shared records decode to exactly the message proto.Marshal would have
// sent, with both Codec and the standard codec, including an empty response.
func TestWireDecodesAsMarshal(t *testing.T) {
	es := wireEntries(t)
	std := encoding.GetCodecV2(protoenc.Name)
	for _, list := range [][]*entry{es, es[:1], nil} {
		env := wire.Envelope{Version: "17", TypeURL: EndpointType, Nonce: "42"}
		anys := make([]*anypb.Any, len(list))
		ress := make([]*discoveryv3.Resource, len(list))
		for i, e := range list {
			value, err := wire.Deterministic.Marshal(e.resource().Message)
			if err != nil {
				t.Fatal(err)
			}
			anys[i] = &anypb.Any{TypeUrl: e.any.TypeUrl, Value: value}
			ress[i] = &discoveryv3.Resource{Name: e.name, Version: e.version, Resource: anys[i]}
		}
		removed := []string{"gone", ""}
		cases := []struct {
			name string
			msg  wire.Msg
			want proto.Message
			got  proto.Message
		}{
			{"sotw", &sotwMsg{env: env, list: list},
				&discoveryv3.DiscoveryResponse{VersionInfo: "17", TypeUrl: EndpointType, Nonce: "42", Resources: anys},
				&discoveryv3.DiscoveryResponse{}},
			{"delta", &deltaMsg{env: env, list: list, removed: removed},
				&discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "17", TypeUrl: EndpointType, Nonce: "42", Resources: ress, RemovedResources: removed},
				&discoveryv3.DeltaDiscoveryResponse{}},
		}
		for _, tc := range cases {
			for _, cd := range []encoding.CodecV2{wire.Codec(), std} {
				bs, err := cd.Marshal(tc.msg)
				if err != nil {
					t.Fatal(err)
				}
				got := tc.got.ProtoReflect().New().Interface()
				if err := proto.Unmarshal(bs.Materialize(), got); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if !proto.Equal(tc.want, got) {
					t.Errorf("%s (%d resources): decoded\n%v\nwant\n%v", tc.name, len(list), prototext.Format(got), prototext.Format(tc.want))
				}
			}
		}
	}
}

// TestWireSotWRecordIsCanonical checks that a SotW record is byte for byte
// the deterministic marshal of its Any: field order only differs inside the
// delta Resource wrapper.
func TestWireSotWRecordIsCanonical(t *testing.T) {
	for _, e := range wireEntries(t) {
		want, err := wire.Deterministic.Marshal(&discoveryv3.DiscoveryResponse{Resources: []*anypb.Any{e.any}})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.wire.SotW.ReadOnlyData(); string(got) != string(want) {
			t.Errorf("%s: record %x, marshal %x", e.name, got, want)
		}
	}
}

// TestWireStreamsWithEitherCodec serves the same state with Codec and with
// gRPC's default codec and checks that both clients decode the same
// responses.
func TestWireStreamsWithEitherCodec(t *testing.T) {
	s := NewServer(Options{})
	s.Apply(services(20), nil)
	var got [2][2]proto.Message
	for i, opts := range [][]grpc.ServerOption{nil, {grpc.ForceServerCodecV2(encoding.GetCodecV2(protoenc.Name))}} {
		cc := dial(t, listen(t, s, opts...))
		st := openADS(t, cc)
		st.send(req(ClusterType))
		got[i][0] = st.recv()
		d := openDeltaADS(t, cc)
		d.send(deltaReq(EndpointType, "svc-3", "svc-7"))
		got[i][1] = d.recv()
	}
	for i := range got { // responses list resources in no particular order
		slices.SortFunc(got[i][0].(*discoveryv3.DiscoveryResponse).Resources, func(a, b *anypb.Any) int {
			return bytes.Compare(a.Value, b.Value)
		})
		slices.SortFunc(got[i][1].(*discoveryv3.DeltaDiscoveryResponse).Resources, func(a, b *discoveryv3.Resource) int {
			return strings.Compare(a.Name, b.Name)
		})
	}
	for j := range 2 {
		if !proto.Equal(got[0][j], got[1][j]) {
			t.Errorf("response %d differs between codecs: Codec\n%v\ndefault\n%v", j, prototext.Format(got[0][j]), prototext.Format(got[1][j]))
		}
	}
	if n := len(got[0][0].(*discoveryv3.DiscoveryResponse).Resources); n != 20 {
		t.Errorf("CDS response has %d clusters, want 20", n)
	}
}
