package wire

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// FuzzCodecRequest feeds arbitrary client bytes to the codec's own
// DiscoveryRequest and DeltaDiscoveryRequest decoders and checks it against proto.Unmarshal: both
// accept the same inputs and decode them to equal messages, the first time
// and again from the cache of name lists. In CI:
//
//	go test -run='^$' -fuzz='^FuzzCodecRequest$' -fuzztime=10s ./xds/wire/
func FuzzCodecRequest(f *testing.F) {
	names := make([]string, 20)
	for i := range names {
		names[i] = string(rune('a'+i)) + "-cluster"
	}
	for _, r := range []*discoveryv3.DiscoveryRequest{
		{TypeUrl: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", ResourceNames: names, VersionInfo: "v1", ResponseNonce: "n1"},
		{ResourceNames: []string{"a", "", "b"}},
		{},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	delta, err := proto.Marshal(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: "t", ResourceNamesSubscribe: names[:3],
		InitialResourceVersions: map[string]string{"a": "1", "b": "", "": "2"}, ResponseNonce: "n"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(delta)
	f.Add([]byte{0x2a, 0x04, 0x0a, 0x01, 'a', 0x12})                   // entry cut short
	f.Add([]byte{0x2a, 0x06, 0x0a, 0x01, 'a', 0x0a, 0x01, 'b'})        // a key twice
	f.Add([]byte{0x2a, 0x03, 0x0a, 0x01, 'a', 0x1a, 0x00, 0x2a, 0x00}) // interleaved
	f.Add([]byte{0x1a, 0x05, 'a'})                                     // truncated name
	f.Add([]byte{0x1a, 0x01, 'a', 0x12, 0x00, 0x1a})                   // interleaved, then cut
	c := Codec().(*codec)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []proto.Message{&discoveryv3.DiscoveryRequest{}, &discoveryv3.DeltaDiscoveryRequest{}} {
			want := m.ProtoReflect().New().Interface()
			wantErr := proto.Unmarshal(b, want)
			for pass := range 2 {
				got := m.ProtoReflect().New().Interface()
				err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("%T pass %d: codec error %v, proto error %v", m, pass, err, wantErr)
				}
				if err == nil && !proto.Equal(got, want) {
					t.Fatalf("%T pass %d: codec decoded %v, proto %v", m, pass, got, want)
				}
			}
		}
		// A stream reader's request keeps its initial versions as
		// records; read back, they are proto's map.
		want := &discoveryv3.DeltaDiscoveryRequest{}
		wantErr := proto.Unmarshal(b, want)
		got := &discoveryv3.DeltaDiscoveryRequest{}
		in := &Inbound{msg: got}
		err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, in)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("inbound: codec error %v, proto error %v", err, wantErr)
		}
		if err == nil {
			iv := InitialOf(got, in)
			if iv.Len() < len(want.InitialResourceVersions) {
				t.Fatalf("inbound: %d initial versions counted, proto has %d", iv.Len(), len(want.InitialResourceVersions))
			}
			got.InitialResourceVersions = iv.Lookup()
			if !proto.Equal(got, want) {
				t.Fatalf("inbound: codec decoded %v, proto %v", got, want)
			}
		}
	})
}
