package etcd_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/sources/etcd"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/etcdtest"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
)

// served is what the test compares of one endpoint of an assignment:
// "addr:port/weight".
func served(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%s:%d/%d", sa.GetAddress(), sa.GetPortValue(), e.GetLoadBalancingWeight().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

// TestBridgeToClients runs the whole bridge with one etcd source holding a
// prefix of each format, written by each format's registrar, and checks
// what an Envoy-like client and a grpc-go xDS client (gRPC naming) receive:
// the first state, an instance added, one removed, one changed, a whole
// service removed, and a malformed key dropped and counted in /sources and
// the metrics while the rest is served; /debug/why names an endpoint's
// key and mod revision.
func TestBridgeToClients(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	reg := etcdtest.Registrar{C: srv.Client(t)}
	backends, _ := grpcxdstest.Backends(t, 2)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	sky := func(id string, port, weight int) etcdtest.SkyRecord {
		return etcdtest.SkyRecord{Host: "10.0.0." + id, Port: port, Weight: weight, TTL: 30}
	}
	must(reg.GRPC(ctx, "services/greeter", backends[0], nil))
	must(reg.SkyDNS(ctx, "/skydns", "x1.web.example.local", sky("1", 8080, 10)))
	must(reg.SkyDNS(ctx, "/skydns", "x2.web.example.local", sky("2", 8080, 10)))
	must(reg.JSON(ctx, "instances/db/i-1", map[string]any{"address": "10.0.2.1", "port": 5432}))

	in := bridgetest.Start(t, fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - name: etcd
    type: etcd
    endpoints: [%q]
    services:
      - {prefix: services/, format: grpc-naming}
      - {prefix: /skydns/local/example/, format: skydns}
      - {prefix: instances/, format: json}
`, srv.ClientURL))
	admin := "http://" + in.AdminAddr().String()
	client, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String()})
	must(err)
	t.Cleanup(client.Close)
	wait := func(what string, cond func(envoysim.State) bool) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, bridgetest.Patience)
		defer cancel()
		if err := client.WaitFor(wctx, cond); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	assignment := func(name string, want ...string) func(envoysim.State) bool {
		slices.Sort(want)
		return func(st envoysim.State) bool {
			cla := st.Assignments[name]
			return cla != nil && slices.Equal(served(cla), want)
		}
	}
	wait("first state", func(st envoysim.State) bool {
		return assignment("greeter", backends[0]+"/1")(st) &&
			assignment("web.example.local", "10.0.0.1:8080/10", "10.0.0.2:8080/10")(st) &&
			assignment("db", "10.0.2.1:5432/1")(st)
	})
	greeter := grpcxdstest.Dial(t, in.XDSAddr().String(), "etcd-test", "greeter")
	if hits := greeter.Hits(ctx, 10); hits[backends[0]] != 10 {
		t.Fatalf("gRPC hits %v, want all 10 on %s", hits, backends[0])
	}

	// gRPC naming: an instance added, then the first removed; the gRPC
	// client follows.
	must(reg.GRPC(ctx, "services/greeter", backends[1], map[string]any{"version": "v2"}))
	wait("greeter added", assignment("greeter", backends[0]+"/1", backends[1]+"/1"))
	must(reg.GRPCDelete(ctx, "services/greeter", backends[0]))
	wait("greeter removed", assignment("greeter", backends[1]+"/1"))
	bridgetest.Eventually(t, bridgetest.Patience, "gRPC calls all reaching "+backends[1], func() bool {
		return greeter.Hits(ctx, 5)[backends[1]] == 5
	})

	// SkyDNS: an instance changed (weight), one removed, one added.
	must(reg.SkyDNS(ctx, "/skydns", "x1.web.example.local", sky("1", 8080, 30)))
	wait("web changed", assignment("web.example.local", "10.0.0.1:8080/30", "10.0.0.2:8080/10"))
	must(reg.Delete(ctx, etcdtest.SkyKey("/skydns", "x2.web.example.local")))
	must(reg.SkyDNS(ctx, "/skydns", "x3.web.example.local", sky("3", 8081, 0)))
	wait("web x2 removed, x3 added", assignment("web.example.local", "10.0.0.1:8080/30", "10.0.0.3:8081/1"))

	// json: a malformed key beside a good one, then the whole service
	// removed.
	must(reg.Raw(ctx, "instances/db/i-2", `{"address": "db-2.internal", "port": 5432}`))
	must(reg.JSON(ctx, "instances/db/i-3", map[string]any{"address": "10.0.2.3", "port": 5432, "weight": 2}))
	wait("db with the good key", assignment("db", "10.0.2.1:5432/1", "10.0.2.3:5432/2"))
	st := bridgetest.SourceStatus(t, in.AdminAddr().String(), "etcd")
	if st.Dropped != 1 || !strings.Contains(st.Notes["dropped_keys"], "instances/db/i-2") {
		t.Errorf("/sources: dropped %d, notes %v; want 1 and the malformed key named", st.Dropped, st.Notes)
	}
	if _, body := bridgetest.Get(admin + "/metrics"); !strings.Contains(body, `xdsbridge_source_dropped_endpoints_total{source="etcd"} 1`) {
		t.Errorf("metrics lack the dropped key of source etcd")
	}
	code, why := bridgetest.Get(admin + "/debug/why?cluster=db")
	if code != http.StatusOK || !strings.Contains(why, "key instances/db/i-3 (mod_revision ") {
		t.Errorf("/debug/why?cluster=db: %d %s; want the endpoint's key and mod revision", code, why)
	}
	must(reg.Delete(ctx, "instances/db/", clientv3.WithPrefix()))
	wait("db removed", func(st envoysim.State) bool {
		_, ok := st.Clusters["db"]
		return !ok && st.Assignments["db"] == nil
	})
}

// TestLeaseExpiryHeldByGuard lets the lease of a registrar that holds the
// only instance of 6 of a source's 8 services expire: etcd deletes them
// all at once, a mass removal, and the default removal guard holds it:
// the client keeps every cluster and endpoint, /sources shows the hold,
// and when the registrar registers again under a new lease nothing was
// ever removed from the client.
func TestLeaseExpiryHeldByGuard(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	c := srv.Client(t)
	reg := etcdtest.Registrar{C: c}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	lease, err := c.Grant(ctx, 2)
	must(err)
	kctx, stopKeepAlive := context.WithCancel(ctx)
	ka, err := c.KeepAlive(kctx, lease.ID)
	must(err)
	go func() {
		for range ka {
		}
	}()
	for i := range 6 {
		must(reg.GRPC(ctx, fmt.Sprintf("services/svc-%d", i), fmt.Sprintf("10.0.0.%d:80", i+1), nil, clientv3.WithLease(lease.ID)))
	}
	must(reg.GRPC(ctx, "services/stay-a", "10.0.1.1:80", nil))
	must(reg.GRPC(ctx, "services/stay-b", "10.0.1.2:80", nil))

	in := bridgetest.Start(t, fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - {name: etcd, type: etcd, endpoints: [%q], services: [{prefix: services/, format: grpc-naming}]}
`, srv.ClientURL))
	client, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String()})
	must(err)
	t.Cleanup(client.Close)
	everything := func(st envoysim.State) bool {
		for i := range 6 {
			if cla := st.Assignments[fmt.Sprintf("svc-%d", i)]; cla == nil || len(served(cla)) != 1 {
				return false
			}
		}
		return len(st.Clusters) == 8
	}
	wctx, cancel := context.WithTimeout(ctx, bridgetest.Patience)
	defer cancel()
	must(client.WaitFor(wctx, everything))

	stopKeepAlive()
	bridgetest.Eventually(t, bridgetest.Patience, "the guard to hold the expiry's removals", func() bool {
		g := bridgetest.SourceStatus(t, in.AdminAddr().String(), "etcd").Guard
		return g != nil && g.HeldServices == 6
	})
	lease2, err := c.Grant(ctx, 60)
	must(err)
	for i := range 6 {
		must(reg.GRPC(ctx, fmt.Sprintf("services/svc-%d", i), fmt.Sprintf("10.0.0.%d:80", i+1), nil, clientv3.WithLease(lease2.ID)))
	}
	bridgetest.Eventually(t, bridgetest.Patience, "the hold to end with the instances back", func() bool {
		return bridgetest.SourceStatus(t, in.AdminAddr().String(), "etcd").Guard == nil
	})
	if !everything(client.State()) {
		t.Errorf("client state after the refill lacks a cluster or endpoint")
	}
	for _, r := range client.Log() {
		if r.TypeURL == envoysim.ClusterType && len(r.Names) < 8 && len(r.Names) > 0 {
			t.Errorf("the client received %d clusters in a response (version %s): a removal went through the guard", len(r.Names), r.Version)
		}
	}
}

// TestBridgeFormatsToClients runs each format's registry life (see
// etcd.DriveFormat) through the whole bridge and checks, after every step,
// what two clients hold: an Envoy-like ADS client, and grpc-go's xDS
// client read through its CSDS (the ClusterLoadAssignment it ACKed, so the
// endpoints, weights and priorities it balances over, or the service held
// as gone); and that the malformed key is counted in /sources. The formats
// share one etcd: each writes under a prefix of its own.
func TestBridgeFormatsToClients(t *testing.T) {
	srv := etcdtest.Start(t)
	reg := etcdtest.Registrar{C: srv.Client(t)}
	for _, format := range etcd.FormatNames {
		t.Run(format, func(t *testing.T) {
			ctx := t.Context()
			var in *bridge.Instance
			var client *envoysim.Client
			var grpcgo *grpcxdstest.Observer
			start := func() {
				in = bridgetest.Start(t, fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - {name: etcd, type: etcd, endpoints: [%q], services: [{prefix: %q, format: %s}]}
`, srv.ClientURL, etcd.FormatPrefix(format), format))
				var err error
				if client, err = envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String()}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(client.Close)
				grpcgo = grpcxdstest.StartObserver(t, in.XDSAddr().String(), "grpc-observer", etcd.FormatClusters(format)...)
			}
			etcd.DriveFormat(t, reg, format, start, func(step string, want map[string][]string) {
				wctx, cancel := context.WithTimeout(ctx, bridgetest.Patience)
				defer cancel()
				err := client.WaitFor(wctx, func(st envoysim.State) bool {
					for name, eps := range want {
						_, held := st.Clusters[name]
						cla := st.Assignments[name]
						if eps == nil && (held || cla != nil) || eps != nil && (cla == nil || !slices.Equal(servedWithPriority(cla), eps)) {
							return false
						}
					}
					return true
				})
				if err != nil {
					t.Fatalf("%s: want %v: %v", step, want, err)
				}
				grpcgo.WaitFor(fmt.Sprintf("%s: grpc-go to hold %v", step, want), func(st map[grpcxdstest.Key]grpcxdstest.ResourceStatus) bool {
					for name, eps := range want {
						if eps == nil {
							if !grpcxdstest.Gone(st, name) {
								return false
							}
							continue
						}
						got, ok := grpcxdstest.Balanced(st, name)
						if !ok || !slices.Equal(endpointStrings(got), eps) {
							return false
						}
					}
					return true
				})
			})
			if st := bridgetest.SourceStatus(t, in.AdminAddr().String(), "etcd"); st.Dropped != 1 {
				t.Errorf("/sources: dropped %d, want the malformed key counted once", st.Dropped)
			}
		})
	}
}

// endpointStrings is eps as servedWithPriority writes each endpoint.
func endpointStrings(eps []grpcxdstest.Endpoint) []string {
	out := make([]string, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out
}

// servedWithPriority is served with each endpoint's priority:
// "addr:port/weight/priority".
func servedWithPriority(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%s:%d/%d/%d", sa.GetAddress(), sa.GetPortValue(), e.GetLoadBalancingWeight().GetValue(), l.GetPriority()))
		}
	}
	slices.Sort(out)
	return out
}
