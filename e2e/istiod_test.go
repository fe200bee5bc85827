package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/countproxy"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/test/istiodtest"
	"github.com/xdsbridge/xdsbridge/xds"
)

// TestRealIstiod runs istio's own code against the bridge (see
// test/istiodtest: istiod's MCP client, ServiceEntry registry, push
// and xDS server, with only the Kubernetes API faked), in both shapes:
// Consul -> bridge -> istiod -> grpc-go's xDS client, which dials
// xds:///web.service.consul:PORT through istiod and whose calls reach the
// example backends registered in Consul.
//
// In order: istiod started before the bridge exits, as istiod does when
// its config source refuses the connection; started again with the bridge
// up, it becomes ready with the ServiceEntries (and WorkloadEntries) in
// its config store and the service in its registry, and the gRPC client,
// asked through CSDS, ACKed the cluster outbound|PORT||web.service.consul
// and its endpoints. A registration and a deregistration reach the client.
// The bridge restarted: istiod reconnects, and since every resource
// carries a content version nothing changes in it (the same resource
// versions in its store, no new version at the client). The bridge down
// for 30 s: istiod keeps serving what it has (calls go on), retries a
// bounded number of times, and once the bridge is back a registration
// reaches the client again.
func TestRealIstiod(t *testing.T) {
	t.Parallel()
	istiodtest.Binary(t) // skips (or fails under make test) without a build
	for _, shape := range []string{"inline", "workload_entries"} {
		t.Run(shape, func(t *testing.T) {
			t.Parallel()
			testRealIstiod(t, shape)
		})
	}
}

func testRealIstiod(t *testing.T, shape string) {
	t.Helper()
	server, client := exampleBinaries(t)
	agent := consultest.Start(t)
	c := agent.Client()
	backends := map[string]int{}
	for _, name := range []string{"a", "b", "c", "d"} {
		p := startProgram(t, "server "+name, exec.Command(server, "--listen", "127.0.0.1:0", "--name", name), nil)
		line := p.waitLog(20*time.Second, "msg=serving", "backend="+name)
		m := regexp.MustCompile(`addr=127\.0\.0\.1:(\d+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("server %s logged no address: %q", name, line)
		}
		backends[name], _ = strconv.Atoi(m[1])
	}
	registerWeb := func(name string) {
		t.Helper()
		if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "web-" + name, Name: "web",
			Address: "127.0.0.1", Port: backends[name], Meta: map[string]string{"protocol": "grpc"}}); err != nil {
			t.Fatal(err)
		}
	}
	registerWeb("a")
	registerWeb("b")

	// The bridge reads Consul through a proxy, so that a restarted agent
	// can be given its registrations before the bridge sees it.
	consul, err := countproxy.TCP(agent.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(consul.Close)
	b := newConsulBridge(t, consul.Addr)
	b.write(t, "istio: {enabled: true, shape: "+shape+"}", "")
	// istiod reads the bridge through a relay that counts its connections.
	relay, err := countproxy.TCP(b.xdsAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)

	// Started before the bridge: its config source refuses, and istiod
	// ends, as istiod does (initConfigSources fails the start-up).
	ist := istiodtest.Start(t, relay.Addr)
	if err := ist.WaitExit(patience); err == nil || !strings.Contains(ist.Log(), "MCP: failed running") {
		t.Fatalf("istiod started before the bridge: exit %v; want it to fail its start-up, log:\n%s", err, ist.Log())
	}
	bridge := start(t, b.cfg)
	bridgetest.WaitReady(t, b.adminAddr, patience)
	ist.Restart()
	ist.WaitReady(patience)

	// The service port: the one port of the ServiceEntry, which istiod's
	// registry shows.
	svc := waitService(t, ist, "web.service.consul")
	port := svc.Ports[0].Port
	cluster := fmt.Sprintf("outbound|%d||web.service.consul", port)
	entries := ist.Configs("ServiceEntry")
	if se, ok := entries["xdsbridge/web"]; !ok || len(entries) != 1 || !strings.Contains(string(se.Spec), `"web.service.consul"`) {
		t.Fatalf("istiod's ServiceEntries: %+v; want xdsbridge/web for web.service.consul", entries)
	}
	if svc.Ports[0].Protocol != "GRPC" {
		t.Errorf("istiod reads the port as %+v, want GRPC", svc.Ports[0])
	}

	dir := t.TempDir()
	boot := filepath.Join(dir, "bootstrap.json")
	writeFile(t, boot, ist.GRPCBootstrap("default"))
	cl := startProgram(t, "client", exec.Command(client, "--target", fmt.Sprintf("xds:///web.service.consul:%d", port),
		"--interval", "50ms", "--timeout", "60s", "--csds", "127.0.0.1:0"), []string{"GRPC_XDS_BOOTSTRAP=" + boot})
	csds := cl.csdsAddr()
	endpointsAre := func(what string, names ...string) map[grpcxdstest.Key]grpcxdstest.ResourceStatus {
		t.Helper()
		cl.waitCalls(patience, "calls answered by "+what, only(names...))
		var want []string
		for _, n := range names {
			want = append(want, fmt.Sprintf("127.0.0.1:%d", backends[n]))
		}
		slices.Sort(want)
		var got map[grpcxdstest.Key]grpcxdstest.ResourceStatus
		bridgetest.Eventually(t, patience, "CSDS: the cluster and its endpoints of "+what+" ACKed", func() bool {
			got = clientStatus(t, csds)
			cds, eds := got[grpcxdstest.Key{TypeURL: xds.ClusterType, Name: cluster}], got[edsKey(cluster)]
			return cds.Status == "ACKED" && eds.Status == "ACKED" && slices.Equal(lbEndpoints(t, eds), want)
		})
		return got
	}
	endpointsAre("a and b", "a", "b")
	if shape == "workload_entries" {
		if we := ist.Configs("WorkloadEntry"); len(we) != 2 {
			t.Errorf("istiod's WorkloadEntries: %v, want the two instances'", we)
		}
	}

	registerWeb("c")
	endpointsAre("a, b and c", "a", "b", "c")
	if err := c.Agent().ServiceDeregister("web-a"); err != nil {
		t.Fatal(err)
	}
	before := endpointsAre("b and c", "b", "c")
	versions := resourceVersions(ist)

	// The bridge restarted: istiod reconnects and changes nothing.
	conns := relay.Counts().Conns
	failed := strings.Count(cl.stdout.String(), " failed: ")
	bridge.stop()
	bridge = start(t, b.cfg)
	bridgetest.WaitReady(t, b.adminAddr, patience)
	waitIstiodStream(t, b.adminAddr, "istiod to reconnect to the restarted bridge")
	if relay.Counts().Conns == conns {
		t.Fatal("istiod's stream did not go through a new connection")
	}
	if got := resourceVersions(ist); !maps.Equal(got, versions) {
		t.Errorf("after the bridge restarted istiod's resource versions are %v, were %v", got, versions)
	}
	if after := clientStatus(t, csds); after[edsKey(cluster)].Version != before[edsKey(cluster)].Version ||
		after[grpcxdstest.Key{TypeURL: xds.ClusterType, Name: cluster}].Version != before[grpcxdstest.Key{TypeURL: xds.ClusterType, Name: cluster}].Version {
		t.Errorf("the client was pushed new versions after the bridge restarted (nothing changed): %+v, were %+v", after, before)
	}

	// The bridge down for 30 s: istiod keeps what it has and retries.
	down := time.Now()
	conns = relay.Counts().Conns
	bridge.stop()
	bridgetest.Eventually(t, 2*time.Minute, "30 s of outage with istiod retrying", func() bool {
		return time.Since(down) >= 30*time.Second && relay.Counts().Conns-conns >= 2
	})
	tries := relay.Counts().Conns - conns
	if len(ist.Configs("ServiceEntry")) != 1 {
		t.Error("istiod lost its ServiceEntry while the bridge was down")
	}
	cl.waitCalls(patience, "calls answered by b and c while the bridge is down", only("b", "c"))
	if n := strings.Count(cl.stdout.String(), " failed: "); n != failed {
		t.Errorf("%d calls failed while the bridge restarted or was down", n-failed)
	}
	// Each reconnection is a connection (gRPC's channel backs off from
	// 1 s by 1.6, istio's MCP client from 0.5 s by 1.5): a handful in
	// 30 s, fewer on a loaded machine, never a hot loop.
	if tries > 12 {
		t.Errorf("istiod connected %d times in %v of outage, want at most 12", tries, time.Since(down).Round(time.Second))
	}
	back := time.Now()
	bridge = start(t, b.cfg)
	bridgetest.WaitReady(t, b.adminAddr, patience)
	waitIstiodStream(t, b.adminAddr, "istiod to reconnect after the outage")
	t.Logf("%s: istiod connected %d times in %v of outage and was back %v after the bridge",
		shape, tries, back.Sub(down).Round(time.Second), time.Since(back).Round(100*time.Millisecond))
	registerWeb("d")
	before = endpointsAre("b, c and d", "b", "c", "d")
	versions = resourceVersions(ist)

	// The bridge restarted while Consul is down: it has not read its
	// registry, so it is not ready and answers istiod nothing (an empty
	// collection would delete every entry istiod has); istiod, connected,
	// keeps what it has. Consul back with the same registrations, the
	// bridge answers with the same content, hence the same versions, and
	// istiod changes nothing.
	agent.Stop() // a -dev agent: it comes back empty
	consul.SetUpstream(freeport.Addr(t))
	bridge.stop()
	conns = relay.Counts().Conns
	received := strings.Count(ist.Log(), "type=networking.istio.io/v1/ServiceEntry")
	start(t, b.cfg) // its cleanup stops it
	bridgetest.Eventually(t, patience, "istiod to connect to the bridge that has not read Consul", func() bool {
		return relay.Counts().Conns > conns
	})
	cl.waitCalls(patience, "calls answered by b, c and d while the bridge waits for Consul", only("b", "c", "d"))
	if code, _ := bridgetest.Get("http://" + b.adminAddr + "/readyz"); code == 200 {
		t.Fatal("the bridge is ready without Consul")
	}
	if got := strings.Count(ist.Log(), "type=networking.istio.io/v1/ServiceEntry"); got != received {
		t.Fatalf("istiod received %d ServiceEntry collections from a bridge that has not read Consul", got-received)
	}
	agent.Restart()
	for _, name := range []string{"b", "c", "d"} {
		registerWeb(name)
	}
	// The agent syncs its registrations to the catalog the bridge reads
	// in the background: the bridge sees Consul once all three are there.
	bridgetest.Eventually(t, patience, "the restarted agent's catalog to hold b, c and d", func() bool {
		entries, _, err := c.Health().Service("web", "", false, nil)
		return err == nil && len(entries) == 3
	})
	consul.SetUpstream(agent.HTTPAddr)
	bridgetest.WaitReady(t, b.adminAddr, patience)
	waitIstiodStream(t, b.adminAddr, "istiod to sync with the bridge once it read Consul")
	bridgetest.Eventually(t, patience, "istiod to hold the versions it held before", func() bool {
		return maps.Equal(resourceVersions(ist), versions)
	})
	if after := clientStatus(t, csds); after[edsKey(cluster)].Version != before[edsKey(cluster)].Version {
		t.Errorf("the client was pushed new endpoints though nothing changed: %+v, were %+v", after[edsKey(cluster)], before[edsKey(cluster)])
	}
	if n := strings.Count(cl.stdout.String(), " failed: "); n != failed {
		t.Errorf("%d calls failed while the bridge restarted, was down, or waited for Consul", n-failed)
	}
}

// exampleBinaries builds the example gRPC server and client once per test
// binary, beside the bridge's binary.
var exampleBinaries = func() func(t *testing.T) (server, client string) {
	var once sync.Once
	var err error
	return func(t *testing.T) (string, string) {
		t.Helper()
		dir := filepath.Dir(binary)
		server, client := filepath.Join(dir, "grpc-server"), filepath.Join(dir, "grpc-client")
		once.Do(func() {
			if err = goBuild(server, "github.com/xdsbridge/xdsbridge/examples/grpc/server"); err == nil {
				err = goBuild(client, "github.com/xdsbridge/xdsbridge/examples/grpc/client")
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return server, client
	}
}()

// waitService waits for host in istiod's registry and returns it.
func waitService(t *testing.T, ist *istiodtest.Istiod, host string) istiodtest.Service {
	t.Helper()
	var svc istiodtest.Service
	bridgetest.Eventually(t, patience, host+" in istiod's registry", func() bool {
		var ok bool
		svc, ok = ist.Services()[host]
		return ok && len(svc.Ports) == 1
	})
	return svc
}

// resourceVersions are the versions of the ServiceEntries and
// WorkloadEntries in istiod's config store, by kind/namespace/name.
func resourceVersions(ist *istiodtest.Istiod) map[string]string {
	out := map[string]string{}
	for _, kind := range []string{"ServiceEntry", "WorkloadEntry"} {
		for name, c := range ist.Configs(kind) {
			out[kind+"/"+name] = c.Metadata.ResourceVersion
		}
	}
	return out
}

// waitIstiodStream waits until the bridge's /clients shows istiod's
// config-source stream with every collection it asked for answered and
// ACKed.
func waitIstiodStream(t *testing.T, adminAddr, what string) {
	t.Helper()
	bridgetest.Eventually(t, 3*time.Minute, what, func() bool {
		var clients []xds.ClientStatus
		if _, body := bridgetest.Get("http://" + adminAddr + "/clients"); json.Unmarshal([]byte(body), &clients) != nil {
			return false
		}
		for _, c := range clients {
			if !strings.Contains(c.ID, "istiod-test.istio-system") {
				continue
			}
			acked := 0
			for _, ts := range c.Types {
				if ts.AckedVersion != "" && ts.AckedVersion == ts.LastVersion {
					acked++
				}
			}
			return acked == len(c.Types) && acked > 10
		}
		return false
	})
}

// lbEndpoints are the addresses of a ClusterLoadAssignment CSDS reports,
// sorted.
func lbEndpoints(t *testing.T, st grpcxdstest.ResourceStatus) []string {
	t.Helper()
	if st.Resource == nil {
		return nil
	}
	var cla endpointv3.ClusterLoadAssignment
	if err := st.Resource.UnmarshalTo(&cla); err != nil {
		t.Fatalf("CSDS's assignment: %v", err)
	}
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))))
		}
	}
	slices.Sort(out)
	return out
}
