package bridge

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/test/istiodsim"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/translate/istio"
	"github.com/xdsbridge/xdsbridge/xds"
)

const (
	seV1 = "networking.istio.io/v1/ServiceEntry"
	weV1 = "networking.istio.io/v1/WorkloadEntry"
)

// servedIstio runs the engine with the istio collections and a publisher
// of the given shape on loopback, and connects an istiod-like client.
func servedIstio(t *testing.T, shape istio.Shape) (*publisher, *istiodsim.Client) {
	t.Helper()
	return servedIstioScoped(t, shape, nil)
}

// servedIstioScoped is servedIstio with scoping rules applied from the
// start, as the bridge applies its configuration's.
func servedIstioScoped(t *testing.T, shape istio.Shape, scopes *translate.Scopes) (*publisher, *istiodsim.Client) {
	t.Helper()
	tr, err := istio.New(istio.Options{Shape: shape})
	if err != nil {
		t.Fatal(err)
	}
	section := config.Istio{Enabled: true, Translator: tr}
	srv := xds.NewServer(xds.Options{Collections: IstioCollections(section)})
	addr := grpcxdstest.Serve(t, srv.Register, append(srv.GRPCOptions(), grpc.ForceServerCodecV2(xds.Codec()))...)
	p := newPublisher(srv, false, slog.New(slog.DiscardHandler), prometheus.NewRegistry()).
		scope(scopes).serveIstio(section, prometheus.NewRegistry())
	return p, istiodsim.Dial(t, addr, istiodsim.Options{})
}

// stored lists the names of a collection istiod stores, sorted.
func stored(c *istiodsim.Client, url string) []string {
	return slices.Sorted(maps.Keys(c.Collection(url)))
}

// TestIstioCollectionsBeforeTheirFirstResource: istiod asks for its
// collections as soon as it connects, which may be before the bridge has
// a single ServiceEntry. Every collection is answered (empty), and a
// service that comes later reaches istiod on the same stream.
func TestIstioCollectionsBeforeTheirFirstResource(t *testing.T) {
	p, c := servedIstio(t, istio.ShapeInline)
	p.publish(manager.Changes{}) // the first state: no services
	c.Wait(t, 20*time.Second, "every collection answered", c.Synced)
	p.publish(manager.Changes{Upserted: []sources.Service{service("web", "10.0.0.1")}})
	c.Wait(t, 20*time.Second, "web's ServiceEntry", func() bool {
		return slices.Equal(stored(c, seV1), []string{"xdsbridge/web"})
	})
}

// TestIstioServesWhatIstiodAsks: every type istiod asks a config source
// for at its start is a collection the bridge serves (those it has no
// resources for stay empty), so none counts against the engine's bound
// on type URLs it does not serve: istiod asks for 16, 14 of them kinds
// the bridge never fills, and a bound of 16 would leave a newer istiod
// two kinds of room before its stream ends and it never syncs.
func TestIstioServesWhatIstiodAsks(t *testing.T) {
	served := IstioCollections(config.Istio{Enabled: true})
	for _, url := range append([]string{istiodsim.MeshConfig}, istiodsim.PilotCollections...) {
		if !slices.Contains(served, url) {
			t.Errorf("istiod asks for %s, which the bridge does not serve", url)
		}
	}
}

// TestIstioCollectionsAreNotScoped: istiod gets every service whatever
// scope its node falls in, at start and after a reload changes the
// scopes: a rule that matches it, delivers nothing and denies a service,
// then a default scope that delivers nothing. No response it is sent
// lacks a service it had (a missing entry would be deleted).
func TestIstioCollectionsAreNotScoped(t *testing.T) {
	none := []sources.Selector{}
	scopes := func(rules []translate.Scope, def *translate.Scope) *translate.Scopes {
		t.Helper()
		s, err := translate.NewScopes(rules, def)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	p, c := servedIstioScoped(t, istio.ShapeInline, scopes([]translate.Scope{{
		Name: "istiod", Node: translate.NodeMatch{ID: "sidecar~*"}, Services: none,
		Deny: []sources.Selector{{Services: []string{"api"}}},
	}}, nil))
	p.publish(manager.Changes{Upserted: []sources.Service{service("web", "10.0.0.1"), service("api", "10.0.1.1")}})
	c.Wait(t, 20*time.Second, "both services, the scope notwithstanding", func() bool {
		return c.Synced() && slices.Equal(stored(c, seV1), []string{"xdsbridge/api", "xdsbridge/web"})
	})
	p.scope(scopes(nil, &translate.Scope{Name: translate.DefaultScopeName, Services: none}))
	p.publish(manager.Changes{Upserted: []sources.Service{service("db", "10.0.2.1")}})
	c.Wait(t, 20*time.Second, "a new service after the reload", func() bool {
		return slices.Equal(stored(c, seV1), []string{"xdsbridge/api", "xdsbridge/db", "xdsbridge/web"})
	})
	for _, r := range c.Responses() {
		if r.TypeURL == seV1 && r.Count < 2 {
			t.Errorf("a response of %d ServiceEntries: %v", r.Count, slices.Sorted(maps.Keys(r.Resources)))
		}
	}
}

// TestIstioPublisherFollowsServices: in the WorkloadEntry shape an
// instance that changes address replaces its WorkloadEntry, a removed
// service takes its ServiceEntry and WorkloadEntries along, and a service
// that fails translation keeps its last good resources and is reported.
func TestIstioPublisherFollowsServices(t *testing.T) {
	p, c := servedIstio(t, istio.ShapeWorkloadEntries)
	p.publish(manager.Changes{Upserted: []sources.Service{service("web", "10.0.0.1", "10.0.0.2"), service("api", "10.0.1.1")}})
	c.Wait(t, 20*time.Second, "both services", func() bool {
		return slices.Equal(stored(c, weV1), []string{"xdsbridge/api-10-0-1-1-80", "xdsbridge/web-10-0-0-1-80", "xdsbridge/web-10-0-0-2-80"})
	})

	n := len(c.Responses())
	p.publish(manager.Changes{Upserted: []sources.Service{service("web", "10.0.0.1", "10.0.0.3")}})
	c.Wait(t, 20*time.Second, "web-10-0-0-2 replaced by web-10-0-0-3", func() bool {
		return slices.Equal(stored(c, weV1), []string{"xdsbridge/api-10-0-1-1-80", "xdsbridge/web-10-0-0-1-80", "xdsbridge/web-10-0-0-3-80"})
	})
	var sent [][]string
	for _, r := range c.Responses()[n:] {
		if r.TypeURL == weV1 {
			sent = append(sent, slices.Sorted(maps.Keys(r.Resources)))
		}
	}
	// Make-before-break: the new entry arrives no later than the old one
	// leaves.
	if len(sent) == 0 || !slices.Contains(sent[0], "xdsbridge/web-10-0-0-3-80") {
		t.Fatalf("WorkloadEntry responses after the replacement: %q", sent)
	}
	t.Logf("WorkloadEntry responses for one replaced address: %q", sent)

	var failed []string
	bad := service("web_api", "10.0.2.1") // its host, web_api.service.consul, is not a valid name
	p.publish(manager.Changes{Upserted: []sources.Service{bad}, Removed: []string{"api"},
		Failed: func(svc string, err error) { failed = append(failed, svc+": "+err.Error()) }})
	c.Wait(t, 20*time.Second, "api removed", func() bool {
		return slices.Equal(stored(c, seV1), []string{"xdsbridge/web"}) &&
			slices.Equal(stored(c, weV1), []string{"xdsbridge/web-10-0-0-1-80", "xdsbridge/web-10-0-0-3-80"})
	})
	if len(failed) != 1 || !strings.HasPrefix(failed[0], `web_api: translating service "web_api" for Istio`) {
		t.Fatalf("failures reported: %q", failed)
	}
}
