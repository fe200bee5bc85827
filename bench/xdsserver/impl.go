// Package xdsserver hosts one xDS server implementation under test in its own
// process, so that its CPU and memory can be measured apart from the load
// generator's. A small HTTP control API on loopback loads the workload,
// applies numbered changes, and reports rusage, RSS and heap. Serve is the
// process's side (`xdsload serve`); Start runs one and is the load
// generator's handle on it.
package xdsserver

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/translate/istio"
	"github.com/xdsbridge/xdsbridge/xds"
)

// Impls are the implementations compared by default. Serve can also
// host "xdsbridge-stdcodec" (the engine with gRPC's default codec),
// "xdsbridge-unbudgeted" (the engine without its send and request budgets),
// "snapshot-naive" (a SnapshotCache whose every type carries the snapshot
// version, so every change re-sends CDS too), "floor" (what gRPC costs to
// deliver a cold start and a change: the same pre-encoded bytes to every
// stream, floor.go) and "stale"
// (a deliberately wrong server, for the benchmark's own tests), and the
// IstioImpls, which serve istiod rather than Envoys.
var Impls = []string{"xdsbridge", "snapshot", "linear"}

// impl is one server implementation. load is called once before any client
// connects; change applies changes ks of the workload (one or a coalesced
// batch, in order) as one publish: one Apply, one SetSnapshot, one
// UpdateResources. Calls are serialized. serverOptions are added to the
// gRPC server's common options.
type impl interface {
	serverOptions() []grpc.ServerOption
	register(g *grpc.Server)
	load(w *workload.World) error
	change(w *workload.World, ks []int) error
}

// built applies changes ks to the world and returns the resulting
// resources of each service they modified, once per service (a batch may
// change one service twice; only its last state is published).
func built(w *workload.World, ks []int) (map[int]workload.Resources, error) {
	out := make(map[int]workload.Resources, len(ks))
	for _, k := range ks {
		i := w.Apply(k)
		r, err := w.Spec.Build(i, k)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// newImpl builds implementation name. limits are the engine's (zero fields:
// its defaults); the other implementations have no such limits.
func newImpl(ctx context.Context, name string, limits xds.Limits, log *slog.Logger) (impl, error) {
	switch name {
	case "xdsbridge":
		return &bridge{srv: xds.NewServer(xds.Options{Logger: log, Limits: limits}), codec: true}, nil
	case "xdsbridge-unbudgeted": // the send and request budgets out of the way, to compare the storms
		return &bridge{srv: xds.NewServer(xds.Options{Logger: log, Limits: limits, SendBudget: math.MaxInt, RequestBudget: math.MaxInt}), codec: true}, nil
	case "xdsbridge-stdcodec":
		return &bridge{srv: xds.NewServer(xds.Options{Logger: log, Limits: limits})}, nil
	case "snapshot":
		return newSnapshot(ctx, true), nil
	case "snapshot-naive":
		return newSnapshot(ctx, false), nil
	case "linear":
		return newLinear(ctx), nil
	case "floor":
		return &floor{}, nil
	case "stale":
		return &stale{newSnapshot(ctx, false)}, nil
	case "istio-inline":
		return newIstioServer(istio.ShapeInline, limits, log)
	case "istio-workload_entries":
		return newIstioServer(istio.ShapeWorkloadEntries, limits, log)
	}
	return nil, fmt.Errorf("unknown implementation %q (want one of %v)", name, Impls)
}

// bridge is xdsbridge's own engine, with its gRPC codec (xds.Codec, which
// decodes repeated SotW name lists once) unless run as xdsbridge-stdcodec.
type bridge struct {
	srv   *xds.Server
	codec bool
}

// busy is the bridge's memory policy hook: responses or requests in flight.
func (b *bridge) busy() bool { return b.srv.InFlight() > 0 }

// The engine's own transport options (xds.Server.GRPCOptions: request
// size, receive windows) are applied as the bridge applies them; without
// codec, gRPC's standard codec replaces the common one.
func (b *bridge) serverOptions() []grpc.ServerOption {
	opts := b.srv.GRPCOptions()
	if !b.codec {
		opts = append(opts, grpc.ForceServerCodecV2(encoding.GetCodecV2(protoenc.Name)))
	}
	return opts
}

func (b *bridge) register(g *grpc.Server) { b.srv.Register(g) }

func (b *bridge) load(w *workload.World) error {
	ups := make([]xds.Resource, 0, 2*w.Spec.Services)
	for i := range w.Spec.Services {
		r, err := w.Spec.Build(i, 0)
		if err != nil {
			return err
		}
		ups = append(ups, envoyResources(r)...)
	}
	b.srv.Apply(ups, nil)
	return nil
}

func (b *bridge) change(w *workload.World, ks []int) error {
	rs, err := built(w, ks)
	if err != nil {
		return err
	}
	// As the bridge's pipeline does, each changed service is re-applied
	// whole; the unchanged cluster costs a hash comparison.
	ups := make([]xds.Resource, 0, 2*len(rs))
	for _, r := range rs {
		ups = append(ups, envoyResources(r)...)
	}
	b.srv.Apply(ups, nil)
	return nil
}

// fleetHash puts every node in one snapshot, the usual way to serve a
// homogeneous fleet from a SnapshotCache.
type fleetHash struct{}

func (fleetHash) ID(*corev3.Node) string { return "fleet" }

// gcp is what the go-control-plane servers share. They get the common
// options (commonOptions), the engine's codec included: for them it is a
// generic request decoder (responses they build go through the standard
// codec), so no server is measured with a cheaper request path than
// another.
type gcp struct{}

func (gcp) serverOptions() []grpc.ServerOption { return nil }

func registerGCP(g *grpc.Server, srv serverv3.Server) {
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, srv)
	clusterservice.RegisterClusterDiscoveryServiceServer(g, srv)
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, srv)
}

// snapshot is stock go-control-plane with a SnapshotCache: every change is a
// new whole snapshot, as its users do. With perType, as a careful user
// does, each type keeps its own version (Snapshot.Resources[type].Version)
// and CDS gets a new one only when a cluster changed; without it, every
// type carries the snapshot's version, so every change re-sends CDS.
type snapshot struct {
	gcp
	cache    cachev3.SnapshotCache
	srv      serverv3.Server
	clusters []types.Resource
	assigns  []types.Resource
	version  int
	perType  bool
	cds      cachev3.Resources // perType: the clusters as last versioned
	cdsDirty bool
}

func newSnapshot(ctx context.Context, perType bool) *snapshot {
	c := cachev3.NewSnapshotCache(true, fleetHash{}, nil)
	return &snapshot{cache: c, srv: serverv3.NewServer(ctx, c, nil), perType: perType, cdsDirty: true}
}

func (s *snapshot) register(g *grpc.Server) { registerGCP(g, s.srv) }

func (s *snapshot) load(w *workload.World) error {
	s.clusters = make([]types.Resource, w.Spec.Services)
	s.assigns = make([]types.Resource, w.Spec.Services)
	for i := range w.Spec.Services {
		r, err := w.Spec.Build(i, 0)
		if err != nil {
			return err
		}
		s.clusters[i], s.assigns[i] = r.Cluster, r.Assignment
	}
	return s.publish()
}

func (s *snapshot) change(w *workload.World, ks []int) error {
	rs, err := built(w, ks)
	if err != nil {
		return err
	}
	for i, r := range rs {
		if !proto.Equal(s.clusters[i].(proto.Message), r.Cluster) {
			s.cdsDirty = true
		}
		s.clusters[i], s.assigns[i] = r.Cluster, r.Assignment
	}
	return s.publish()
}

func (s *snapshot) publish() error {
	s.version++
	v := strconv.Itoa(s.version)
	var snap *cachev3.Snapshot
	if s.perType {
		// NewResources copies the slices into its own maps.
		if s.cdsDirty {
			s.cds, s.cdsDirty = cachev3.NewResources(v, s.clusters), false
		}
		snap = &cachev3.Snapshot{}
		snap.Resources[types.Cluster] = s.cds
		snap.Resources[types.Endpoint] = cachev3.NewResources(v, s.assigns)
	} else {
		var err error
		snap, err = cachev3.NewSnapshot(v, map[resourcev3.Type][]types.Resource{
			resourcev3.ClusterType:  s.clusters,
			resourcev3.EndpointType: s.assigns,
		})
		if err != nil {
			return fmt.Errorf("building snapshot: %w", err)
		}
	}
	if err := snap.Consistent(); err != nil {
		return fmt.Errorf("checking snapshot: %w", err)
	}
	if err := s.cache.SetSnapshot(context.Background(), "fleet", snap); err != nil {
		return fmt.Errorf("setting snapshot: %w", err)
	}
	return nil
}

// linear is stock go-control-plane with one LinearCache per type behind a
// MuxCache: per-resource versions, so a change updates one resource.
type linear struct {
	gcp
	cds, eds *cachev3.LinearCache
	srv      serverv3.Server
}

func newLinear(ctx context.Context) *linear {
	l := &linear{
		cds: cachev3.NewLinearCache(resourcev3.ClusterType),
		eds: cachev3.NewLinearCache(resourcev3.EndpointType),
	}
	mux := &cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return r.GetTypeUrl() },
		Caches: map[string]cachev3.Cache{
			resourcev3.ClusterType:  l.cds,
			resourcev3.EndpointType: l.eds,
		},
	}
	l.srv = serverv3.NewServer(ctx, mux, nil)
	return l
}

func (l *linear) register(g *grpc.Server) { registerGCP(g, l.srv) }

func (l *linear) load(w *workload.World) error {
	cds := make(map[string]types.Resource, w.Spec.Services)
	eds := make(map[string]types.Resource, w.Spec.Services)
	for i := range w.Spec.Services {
		r, err := w.Spec.Build(i, 0)
		if err != nil {
			return err
		}
		cds[r.Cluster.GetName()], eds[r.Assignment.GetClusterName()] = r.Cluster, r.Assignment
	}
	l.cds.SetResources(cds)
	l.eds.SetResources(eds)
	return nil
}

func (l *linear) change(w *workload.World, ks []int) error {
	rs, err := built(w, ks)
	if err != nil {
		return err
	}
	eds := make(map[string]types.Resource, len(rs))
	for _, r := range rs {
		eds[r.Assignment.GetClusterName()] = r.Assignment
	}
	// One call notifies the watches once for the whole batch.
	if err := l.eds.UpdateResources(eds, nil); err != nil {
		return fmt.Errorf("updating assignments: %w", err)
	}
	return nil
}

// stale is a deliberately wrong server for the benchmark's own tests: it
// accepts changes but never publishes them, so a run against it must be
// reported as failed.
type stale struct{ *snapshot }

func (s *stale) change(w *workload.World, ks []int) error {
	for _, k := range ks {
		w.Apply(k)
	}
	return nil
}
