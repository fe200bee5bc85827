package target

import (
	"errors"
	"fmt"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/internal/bench/workload"
	"github.com/xdsbridge/xdsbridge/xds"
)

// floor is the cold-start floor (impl "floor"): a delta ADS server that
// answers each stream's first subscription of a type with one response
// holding every resource of the type, encoded once at load and written as
// the same bytes to every stream. It keeps no per-client state and ignores
// ACKs, so its CPU per client is what gRPC costs to deliver an initial
// state: the bound no real server beats. It serves cold starts only (no
// changes, no SotW).
type floor struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	mu    sync.RWMutex
	wires map[string][]byte // by type URL: the encoded DeltaDiscoveryResponse
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

func (f *floor) load(w *workload.World) error {
	cds := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "1", TypeUrl: resourcev3.ClusterType, Nonce: "1"}
	eds := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "1", TypeUrl: resourcev3.EndpointType, Nonce: "2"}
	add := func(resp *discoveryv3.DeltaDiscoveryResponse, name string, m proto.Message) error {
		a, err := anypb.New(m)
		resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: name, Version: "1", Resource: a})
		return err
	}
	for i := range w.Spec.Services {
		r, err := w.Spec.Build(i, 0)
		if err != nil {
			return err
		}
		if err := errors.Join(add(cds, r.Cluster.GetName(), r.Cluster), add(eds, r.Assignment.GetClusterName(), r.Assignment)); err != nil {
			return err
		}
	}
	wires := map[string][]byte{}
	for _, m := range []*discoveryv3.DeltaDiscoveryResponse{cds, eds} {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			return fmt.Errorf("encoding the floor's %s response: %w", m.GetTypeUrl(), err)
		}
		wires[m.GetTypeUrl()] = b
	}
	f.mu.Lock()
	f.wires = wires
	f.mu.Unlock()
	return nil
}

func (f *floor) change(*workload.World, []int) error {
	return errors.New("the floor serves cold starts only")
}

// DeltaAggregatedResources answers the first subscription of each type.
func (f *floor) DeltaAggregatedResources(st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	sent := map[string]bool{}
	for {
		req, err := st.Recv()
		if err != nil {
			return nil // the client left
		}
		typ := req.GetTypeUrl()
		if sent[typ] || len(req.GetResourceNamesSubscribe()) == 0 {
			continue // an ACK
		}
		f.mu.RLock()
		b := f.wires[typ]
		f.mu.RUnlock()
		if b == nil {
			continue
		}
		sent[typ] = true
		if err := st.SendMsg(rawResponse(b)); err != nil {
			return err
		}
	}
}
