package e2e

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/xds"
)

// TestEdgeBootstrap checks that the edge example's Envoy bootstrap holds
// nothing but the bridge: no static listener, the bridge's cluster alone,
// and listeners and clusters over ADS.
func TestEdgeBootstrap(t *testing.T) {
	b := bootstrap(t, filepath.Join(examples, "edge", "envoy.yaml"))
	dyn := b.GetDynamicResources()
	if dyn.GetLdsConfig().GetAds() == nil || dyn.GetCdsConfig().GetAds() == nil {
		t.Errorf("lds_config %v, cds_config %v: want both over ADS", dyn.GetLdsConfig(), dyn.GetCdsConfig())
	}
	st := b.GetStaticResources()
	if len(st.GetListeners()) != 0 || len(st.GetSecrets()) != 0 || len(st.GetClusters()) != 1 || st.GetClusters()[0].GetName() != xds.DefaultConfigCluster {
		t.Errorf("static resources %d listeners, %d secrets, clusters %v: want the bridge's cluster alone",
			len(st.GetListeners()), len(st.GetSecrets()), st.GetClusters())
	}
}

// TestEdgeExample runs the commands of examples/edge/README.md against a
// real Consul agent: the dump shows the listener and a route
// configuration holding a virtual host per service and the route the
// api service's Fabio-style tag claims; the bridge, running, gives
// simulated edge Envoys (one per ADS variant) whose bootstrap holds only
// the bridge their listener, routes, clusters and endpoints, and they
// route requests by host and path to web and api. A service registered
// with a route tag while the bridge runs becomes reachable, and its tag's
// route goes once it is deregistered (its cluster stays, without
// endpoints: the Consul source's on_empty default); no request ever meets
// a route to a cluster the Envoy does not hold or has not warmed.
func TestEdgeExample(t *testing.T) {
	config := filepath.Join(examples, "edge", "bridge.yaml")
	validate(t, config)
	agent := registerFromReadme(t, "edge")
	xdsAddr, adminAddr := freeport.Addr(t), freeport.Addr(t)
	cfg := rewriteInto(t, t.TempDir(), config, "127.0.0.1:8500", agent.HTTPAddr,
		"127.0.0.1:18000", xdsAddr, "127.0.0.1:19000", adminAddr)

	code, out := runBinaryStdout(t, "dump", "--config", cfg, "--type", "lds,rds", "--format", "json", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("bridge dump --type lds,rds: exit %d\n%s", code, out)
	}
	listeners, routes := unpackEdge(t, out)
	if names := slices.Sorted(maps.Keys(listeners)); !slices.Equal(names, []string{"edge_http"}) {
		t.Errorf("dumped listeners %q, want edge_http", names)
	}
	rc := routes["edge"]
	if rc == nil {
		t.Fatalf("no route configuration edge in the dump: %v", out)
	}
	for host, want := range map[string]string{"web.service.consul": "web", "api.service.consul": "api"} {
		if got := routeTo(rc, host, "/"); got != want {
			t.Errorf("the dumped routes send %s/ to %q, want %q", host, got, want)
		}
	}
	if got := routeTo(rc, "any.example.com", "/api/users"); got != "api" {
		t.Errorf("the dumped routes send any.example.com/api/users to %q, want api (its tag urlprefix-/api)", got)
	}

	start(t, cfg)
	waitListening(t, adminAddr, patience)
	var edges []*envoysim.Client
	for _, delta := range []bool{false, true} {
		edges = append(edges, startClient(t, xdsAddr, envoysim.Options{Node: "edge-1", Cluster: "edge", Delta: delta, Listeners: true}))
	}
	reach := func(step, host, path, want string) {
		t.Helper()
		for _, c := range edges {
			waitClient(t, c, step+": "+host+path+" routed to "+want, func(envoysim.State) bool {
				r := c.Request("edge_http", host, path)
				if want == "" {
					return r.Status == 404
				}
				return r.Status == 200 && r.Cluster == want
			})
		}
	}
	reach("start", "web.service.consul", "/", "web")
	reach("start", "api.service.consul", "/", "api")
	reach("start", "any.example.com", "/api/users", "api")
	// What the connected Envoy holds, as `bridge config` shows it.
	code, out = runBinaryStdout(t, "config", "edge-1", "--type", "lds,rds", "--format", "json", "--admin", "http://"+adminAddr)
	if code != 0 {
		t.Fatalf("bridge config edge-1 --type lds,rds: exit %d\n%s", code, out)
	}
	if held, heldRoutes := unpackEdge(t, out); held["edge_http"] == nil || heldRoutes["edge"] == nil {
		t.Errorf("bridge config edge-1 shows listeners %v and route configurations %v, want edge_http and edge", slices.Sorted(maps.Keys(held)), slices.Sorted(maps.Keys(heldRoutes)))
	}

	consul := agent.Client()
	if err := consul.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "shop-1", Name: "shop",
		Address: "127.0.0.1", Port: 9002, Tags: []string{"urlprefix-/shop"}}); err != nil {
		t.Fatal(err)
	}
	reach("shop registered", "any.example.com", "/shop/cart", "shop")
	reach("shop registered", "shop.service.consul", "/", "shop")
	if err := consul.Agent().ServiceDeregister("shop-1"); err != nil {
		t.Fatal(err)
	}
	reach("shop deregistered", "any.example.com", "/shop/cart", "")
	for _, c := range edges {
		if tr := c.Traffic(); tr.Misses != 0 || tr.OutOfOrder != 0 {
			t.Errorf("%d requests met a missing or warming cluster (%s), %d resources out of order (%s)",
				tr.Misses, tr.LastMiss, tr.OutOfOrder, tr.LastOutOfOrder)
		}
	}
	reach("shop deregistered", "web.service.consul", "/", "web")
}

// unpackEdge decodes the listeners and route configurations of a dump
// (`bridge dump --type lds,rds --format json`), by name.
func unpackEdge(t *testing.T, out string) (map[string]*listenerv3.Listener, map[string]*routev3.RouteConfiguration) {
	t.Helper()
	var cd adminv3.ConfigDump
	if err := protojson.Unmarshal([]byte(out), &cd); err != nil {
		t.Fatalf("the dump is not an envoy.admin.v3.ConfigDump: %v\n%s", err, out)
	}
	all, _, err := bridge.Unpack(&cd)
	if err != nil {
		t.Fatal(err)
	}
	listeners := map[string]*listenerv3.Listener{}
	for _, r := range all[resource.ListenerType] {
		var l listenerv3.Listener
		if err := r.Resource.UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		listeners[l.GetName()] = &l
	}
	routes := map[string]*routev3.RouteConfiguration{}
	for _, r := range all[resource.RouteType] {
		var rc routev3.RouteConfiguration
		if err := r.Resource.UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		routes[rc.GetName()] = &rc
	}
	return listeners, routes
}

// routeTo is the cluster rc sends host and path to: the virtual host
// naming host exactly, else the one of "*", and its first route whose
// prefix the path starts with ("" for none).
func routeTo(rc *routev3.RouteConfiguration, host, path string) string {
	pick := func(domain string) *routev3.VirtualHost {
		for _, vh := range rc.GetVirtualHosts() {
			if slices.Contains(vh.GetDomains(), domain) {
				return vh
			}
		}
		return nil
	}
	vh := pick(host)
	if vh == nil {
		vh = pick("*")
	}
	for _, r := range vh.GetRoutes() {
		if p := r.GetMatch().GetPrefix(); p != "" && len(path) >= len(p) && path[:len(p)] == p {
			return r.GetRoute().GetCluster()
		}
	}
	return ""
}
