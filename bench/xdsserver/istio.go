package xdsserver

import (
	"fmt"
	"log/slog"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	bridgecfg "github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/translate/istio"
	"github.com/xdsbridge/xdsbridge/xds"
)

// IstioImpls are the implementations that serve istiod: the bridge's
// engine with its Istio collections, in each shape (see istioServer).
var IstioImpls = []string{"istio-inline", "istio-workload_entries"}

// istioServer is the bridge serving istiod with istio.enabled in one shape:
// the engine with every Istio collection (bridge.IstioCollections), and
// every service applied as the bridge's publisher applies it, its Envoy
// cluster and assignment and its Istio resources (bridge.IstioPublisher)
// in one Apply. The Envoy resources stay in so that a change costs the
// server what it costs the bridge, which translates for both whether or
// not an Envoy is connected.
type istioServer struct {
	bridge
	pub *bridgecfg.IstioPublisher
}

func newIstioServer(shape istio.Shape, limits xds.Limits, log *slog.Logger) (*istioServer, error) {
	tr, err := istio.New(istio.Options{Shape: shape})
	if err != nil {
		return nil, fmt.Errorf("istio translator: %w", err)
	}
	srv := xds.NewServer(xds.Options{Logger: log, Limits: limits, Collections: bridgecfg.IstioCollections(config.Istio{Enabled: true})})
	return &istioServer{bridge: bridge{srv: srv, codec: true}, pub: bridgecfg.NewIstioPublisher(tr, log, prometheus.NewRegistry())}, nil
}

func (s *istioServer) load(w *workload.World) error {
	var ups []xds.Resource
	for i := range w.Spec.Services {
		r, _, err := s.service(w.Spec, i, 0)
		if err != nil {
			return err
		}
		ups = append(ups, r...)
	}
	s.srv.Apply(ups, nil)
	return nil
}

func (s *istioServer) change(w *workload.World, ks []int) error {
	var ups []xds.Resource
	var gone []xds.Key
	for _, k := range ks {
		i := w.Apply(k)
		r, g, err := s.service(w.Spec, i, k)
		if err != nil {
			return err
		}
		ups, gone = append(ups, r...), append(gone, g...)
	}
	s.srv.Apply(ups, gone)
	return nil
}

// service returns what the bridge applies for service i after change k,
// and the Istio resources of it that are gone.
func (s *istioServer) service(spec workload.Spec, i, k int) ([]xds.Resource, []xds.Key, error) {
	r, err := spec.Build(i, k)
	if err != nil {
		return nil, nil, err
	}
	ups, gone, err := s.pub.Upsert(spec.Service(i, k))
	if err != nil {
		return nil, nil, fmt.Errorf("translating workload service %d for Istio: %w", i, err)
	}
	return append(envoyResources(r), ups...), gone, nil
}

// envoyResources are a service's Envoy resources as the bridge applies
// them.
func envoyResources(r workload.Resources) []xds.Resource {
	return []xds.Resource{
		{Type: resourcev3.ClusterType, Name: r.Cluster.GetName(), Message: r.Cluster},
		{Type: resourcev3.EndpointType, Name: r.Assignment.GetClusterName(), Message: r.Assignment},
	}
}
