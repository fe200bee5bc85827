package xdsserver

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/xds"
)

// floor is the floor of what gRPC costs to deliver xDS (impl "floor"): an
// ADS server, delta and SotW, that writes the same pre-encoded bytes to
// every stream and keeps no per-client state beyond the stream itself. It
// answers each stream's first subscription of a type with one response
// holding every resource of the type, and every change with one response
// holding the changed assignments, encoded once and written to every
// stream that holds the assignments (fanout.go). It ignores ACKs, NACKs
// and the names a client asks for. Its CPU per client is the bound no real
// server beats: for a cold start (S6) and for a change (S1, S3, S7).
type floor struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer

	mu      sync.Mutex
	version int
	// clusters and assigns are every resource as last changed, by
	// service, with its delta version.
	clusters, assigns []floorResource
	// wires are the initial states, by type and protocol, encoded when
	// first asked for after a load or a change.
	wires map[wireKey]rawResponse
	// subs are the streams sent the assignments, which every change goes to.
	subs map[*floorStream]struct{}
}

type floorResource struct {
	name, version string
	any           *anypb.Any
}

type wireKey struct {
	typ   string
	delta bool
}

// rawResponse is a response already encoded; floorCodec sends its bytes.
type rawResponse []byte

// floorCodec sends rawResponse as is and leaves everything else to the
// engine's codec (the request decoder every implementation gets).
type floorCodec struct{ encoding.CodecV2 }

func (c floorCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawResponse); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.CodecV2.Marshal(v)
}

func (c floorCodec) Name() string { return protoenc.Name }

func (f *floor) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(floorCodec{xds.Codec()})}
}

func (f *floor) register(g *grpc.Server) {
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, f)
}

// packed returns m as an Any, marshalled deterministically as the engine
// marshals resources, so that clients compare content hashes.
func packed(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, fmt.Errorf("packing %T: %w", m, err)
	}
	return a, nil
}

func (f *floor) load(w *workload.World) error {
	clusters := make([]floorResource, w.Spec.Services)
	assigns := make([]floorResource, w.Spec.Services)
	for i := range w.Spec.Services {
		r, err := w.Spec.Build(i, 0)
		if err != nil {
			return err
		}
		c, err := packed(r.Cluster)
		a, err2 := packed(r.Assignment)
		if err := errors.Join(err, err2); err != nil {
			return err
		}
		clusters[i] = floorResource{r.Cluster.GetName(), "0", c}
		assigns[i] = floorResource{r.Assignment.GetClusterName(), "0", a}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusters, f.assigns = clusters, assigns
	f.wires = map[wireKey]rawResponse{}
	if f.subs == nil {
		f.subs = map[*floorStream]struct{}{}
	}
	// The cold start is measured from a loaded server: its responses are
	// encoded now, as the engine's frames are built by Apply.
	for _, typ := range []string{resourcev3.ClusterType, resourcev3.EndpointType} {
		for _, delta := range []bool{true, false} {
			if _, err := f.initialLocked(typ, delta); err != nil {
				return err
			}
		}
	}
	return nil
}

// initialLocked returns the encoded initial state of a type, nil for a
// type the floor does not serve or before a load; f.mu must be held.
func (f *floor) initialLocked(typ string, delta bool) (rawResponse, error) {
	if f.wires == nil {
		return nil, nil // nothing loaded yet
	}
	k := wireKey{typ, delta}
	if b, ok := f.wires[k]; ok {
		return b, nil
	}
	var rs []floorResource
	switch typ {
	case resourcev3.ClusterType:
		rs = f.clusters
	case resourcev3.EndpointType:
		rs = f.assigns
	default:
		return nil, nil
	}
	b, err := encodeFloor(typ, delta, strconv.Itoa(f.version), rs)
	if err != nil {
		return nil, err
	}
	f.wires[k] = b
	return b, nil
}

// encodeFloor encodes one response of the protocol carrying rs, version v
// as its version and nonce.
func encodeFloor(typ string, delta bool, v string, rs []floorResource) (rawResponse, error) {
	var m proto.Message
	if delta {
		d := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: v, TypeUrl: typ, Nonce: v,
			Resources: make([]*discoveryv3.Resource, len(rs))}
		for i, r := range rs {
			d.Resources[i] = &discoveryv3.Resource{Name: r.name, Version: r.version, Resource: r.any}
		}
		m = d
	} else {
		s := &discoveryv3.DiscoveryResponse{VersionInfo: v, TypeUrl: typ, Nonce: v, Resources: make([]*anypb.Any, len(rs))}
		for i, r := range rs {
			s.Resources[i] = r.any
		}
		m = s
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the floor's %s response: %w", typ, err)
	}
	return b, nil
}

// change encodes the changed assignments once per protocol and writes
// them to every stream that holds the assignments. A workload change
// alters one assignment and never a cluster (workload.Spec.Service), so
// CDS is not re-sent.
func (f *floor) change(w *workload.World, ks []int) error {
	rs, err := built(w, ks)
	if err != nil {
		return err
	}
	order := slices.Sorted(maps.Keys(rs))
	f.mu.Lock()
	f.version++
	v := strconv.Itoa(f.version)
	changed := make([]floorResource, 0, len(order))
	for _, i := range order {
		a, err := packed(rs[i].Assignment)
		if err != nil {
			f.mu.Unlock()
			return err
		}
		f.assigns[i] = floorResource{rs[i].Assignment.GetClusterName(), v, a}
		changed = append(changed, f.assigns[i])
	}
	delete(f.wires, wireKey{resourcev3.EndpointType, true})
	delete(f.wires, wireKey{resourcev3.EndpointType, false})
	streams := make([]*floorStream, 0, len(f.subs))
	for s := range f.subs {
		streams = append(streams, s)
	}
	f.mu.Unlock()
	delta, err := encodeFloor(resourcev3.EndpointType, true, v, changed)
	sotw, err2 := encodeFloor(resourcev3.EndpointType, false, v, changed)
	if err := errors.Join(err, err2); err != nil {
		return err
	}
	fanOut(streams, delta, sotw)
	return nil
}
