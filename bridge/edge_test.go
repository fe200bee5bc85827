package bridge

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/static"
	"github.com/xdsbridge/xdsbridge/test/heaptest"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

// taggedService is a service whose endpoints carry tags.
func taggedService(name string, tags ...string) sources.Service {
	s := service(name, "10.0.0.1")
	s.Endpoints[0].Metadata = map[string]string{sources.MetaTags: strings.Join(tags, ",")}
	return s
}

// find returns the upsert of type typ named name in the last Apply.
func find(t *testing.T, rec *recorder, typ, name string) (xds.Resource, bool) {
	t.Helper()
	last := rec.calls[len(rec.calls)-1]
	for _, u := range last.upserts {
		if u.Type == typ && u.Name == name {
			return u, true
		}
	}
	return xds.Resource{}, false
}

func edgeRoutes(t *testing.T) *translate.Routes {
	t.Helper()
	r, err := translate.NewRouteRule(translate.RouteRule{Config: "edge", TagPrefix: translate.DefaultTagPrefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &translate.Routes{Rules: []translate.RouteRule{r}}
}

func edgeListener(t *testing.T, name string) config.Listener {
	t.Helper()
	l, err := translate.NewListener(translate.ListenerSpec{Name: name, Port: 8080, RouteConfig: "edge"})
	if err != nil {
		t.Fatal(err)
	}
	return config.Listener{Resource: l, RouteConfig: "edge"}
}

func routeClusters(t *testing.T, r xds.Resource) []string {
	t.Helper()
	var out []string
	for _, vh := range r.Message.(*routev3.RouteConfiguration).GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			out = append(out, vh.GetDomains()[0]+rt.GetMatch().GetPrefix()+">"+rt.GetRoute().GetCluster())
		}
	}
	return out
}

func TestPublisherRoutes(t *testing.T) {
	rec := &recorder{}
	p := newPublisher(rec, true, slog.New(slog.DiscardHandler), prometheus.NewRegistry()).
		envoy(edgeRoutes(t), []config.Listener{edgeListener(t, "edge_http"), edgeListener(t, "api")})
	p.publish(manager.Changes{Upserted: []sources.Service{taggedService("api", "urlprefix-/api"), taggedService("web", "urlprefix-/")}})

	rds, ok := find(t, rec, resource.RouteType, "edge")
	if !ok || !slices.Equal(routeClusters(t, rds), []string{"*/api>api", "*/>web"}) {
		t.Fatalf("route configuration: %v (found %v)", rds, ok)
	}
	if l, ok := find(t, rec, resource.ListenerType, "edge_http"); !ok || l.GRPCOnly || l.GRPC != nil {
		t.Fatalf("configured listener: %+v", l)
	}
	// The listener named like the service api serves Envoys the
	// configured one and gRPC clients the service's chain.
	if l, ok := find(t, rec, resource.ListenerType, "api"); !ok || l.GRPCOnly || l.GRPC == nil ||
		l.Message.(*listenerv3.Listener).GetAddress() == nil || l.GRPC.(*listenerv3.Listener).GetApiListener() == nil {
		t.Fatalf("merged listener api: %+v", l)
	}

	// An endpoint change builds no route configuration.
	p.publish(manager.Changes{Upserted: []sources.Service{taggedService("api", "urlprefix-/api")}})
	if _, ok := find(t, rec, resource.RouteType, "edge"); ok {
		t.Fatal("an endpoint change re-sent the route configuration")
	}
	// A moved tag does.
	p.publish(manager.Changes{Upserted: []sources.Service{taggedService("api", "urlprefix-/v2")}})
	if rds, ok := find(t, rec, resource.RouteType, "edge"); !ok || !slices.Equal(routeClusters(t, rds), []string{"*/v2>api", "*/>web"}) {
		t.Fatalf("after a tag moved: %v", rds)
	}
	// Removing api leaves the configured listener api, without the chain.
	p.publish(manager.Changes{Removed: []string{"api"}})
	last := rec.calls[len(rec.calls)-1]
	if slices.Contains(names(last.removals), "lds/api") {
		t.Fatal("the configured listener api was removed with the service")
	}
	if l, ok := find(t, rec, resource.ListenerType, "api"); !ok || l.GRPC != nil || l.GRPCOnly {
		t.Fatalf("listener api after the service left: %+v", l)
	}
	if !slices.Contains(names(last.removals), "rds/api") {
		t.Fatalf("the service's gRPC route configuration was not removed: %v", names(last.removals))
	}
	if rds, ok := find(t, rec, resource.RouteType, "edge"); !ok || !slices.Equal(routeClusters(t, rds), []string{"*/>web"}) {
		t.Fatalf("after api left: %v", rds)
	}
}

// TestPublisherFiles: secrets and raw resources wait for the first
// publish, then go out as they change; a raw cluster named like a service
// is served only while the service is not.
func TestPublisherFiles(t *testing.T) {
	scopes, err := translate.NewScopes([]translate.Scope{{Name: "edge", Node: translate.NodeMatch{Cluster: "edge"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	reg := prometheus.NewRegistry()
	p := newPublisher(rec, false, slog.New(slog.DiscardHandler), reg).scope(scopes)
	raw := &clusterv3.Cluster{Name: "web", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	sec := &tlsv3.Secret{Name: "cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{}}}
	p.files(static.State{
		Secrets: []static.Secret{{Key: "secrets[0]", Resource: sec, Grant: []string{"edge"}}},
		Files:   []static.File{{Key: "resources[0]", Raw: translate.Raw{Clusters: []*clusterv3.Cluster{raw}}}},
	})
	if len(rec.calls) != 0 {
		t.Fatalf("%d Apply calls before the first publish", len(rec.calls))
	}
	p.publish(manager.Changes{Upserted: []sources.Service{service("web", "10.0.0.1")}})
	if s, ok := find(t, rec, resource.SecretType, "cert"); !ok || !s.Private || s.Scopes != xds.ScopeSet(0).With(1) {
		t.Fatalf("secret: %+v", s)
	}
	if c, _ := find(t, rec, resource.ClusterType, "web"); c.Message.(*clusterv3.Cluster).GetType() != clusterv3.Cluster_EDS {
		t.Fatalf("the raw cluster took the service's name: %v", c.Message)
	}
	p.publish(manager.Changes{Removed: []string{"web"}})
	last := rec.calls[len(rec.calls)-1]
	if c, ok := find(t, rec, resource.ClusterType, "web"); !ok || c.Message.(*clusterv3.Cluster).GetType() != clusterv3.Cluster_STATIC ||
		slices.Contains(names(last.removals), "cds/web") || !slices.Contains(names(last.removals), "eds/web") {
		t.Fatalf("after the service left: upserts %v, removals %v", names(last.upserts), names(last.removals))
	}
	// The files change: the secret goes, at once.
	p.files(static.State{Files: []static.File{{Key: "resources[0]", Raw: translate.Raw{Clusters: []*clusterv3.Cluster{raw}}}}})
	if last := rec.calls[len(rec.calls)-1]; !slices.Equal(names(last.removals), []string{"sds/cert"}) || len(last.upserts) != 0 {
		t.Fatalf("secret removal: upserts %v, removals %v", names(last.upserts), names(last.removals))
	}
}

// TestEdgeForgetsShrunkServices: the listener side's maps keyed by service
// (served names, route claims) are made again once a registry shrank, so
// after 20,000 services with a route each shrink to 6 the edge keeps what
// 6 services need, measured by the live heap, not the maps' buckets for
// 20,000 (Go maps never shrink by themselves).
func TestEdgeForgetsShrunkServices(t *testing.T) {
	const n, kept = 20000, 6
	routes := edgeRoutes(t)
	before := heaptest.Live()
	g := newEdge(slog.New(slog.DiscardHandler), &atomic.Pointer[routeWhy]{}, prometheus.NewRegistry())
	g.configure(routes, nil)
	for i := range n {
		g.service(taggedService(fmt.Sprint("svc-", i), fmt.Sprintf("urlprefix-/p%d", i)))
	}
	g.take()
	for i := kept; i < n; i++ {
		g.remove(fmt.Sprint("svc-", i))
	}
	g.take()
	got := heaptest.Live() - before
	if len(g.services) != kept || len(g.routes.claims) != kept || len(g.routes.built["edge"].GetVirtualHosts()[0].GetRoutes()) != kept {
		t.Fatalf("%d services, %d with claims, route configuration %v; want %d", len(g.services), len(g.routes.claims), g.routes.built["edge"], kept)
	}
	if got > 256<<10 {
		t.Fatalf("the edge of %d services kept %d KB after a shrink from %d, want at most 256 KB", kept, got>>10, n)
	}
}
