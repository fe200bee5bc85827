package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/encoding/protojson"
	mcpv1alpha1 "istio.io/api/mcp/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/istiodsim"
	"github.com/xdsbridge/xdsbridge/xds"
)

const (
	serviceEntries  = "networking.istio.io/v1/ServiceEntry"
	workloadEntries = "networking.istio.io/v1/WorkloadEntry"
)

// TestIstiodReadsConsul runs the bridge binary on a real Consul agent with
// the istio section enabled, in both shapes, and reads it as istiod does
// (test/istiodsim): every collection istiod asks for is answered, the
// Consul services arrive as ServiceEntries (and WorkloadEntries), an
// instance registered or deregistered reaches the collection, /clients
// shows istiod's stream with its collections, and a NACKed response is
// neither re-sent nor blocks the next change, which carries the whole
// collection again.
func TestIstiodReadsConsul(t *testing.T) {
	for _, shape := range []string{"inline", "workload_entries"} {
		t.Run(shape, func(t *testing.T) { testIstiod(t, shape) })
	}
}

func testIstiod(t *testing.T, shape string) {
	t.Helper()
	agent := consultest.Start(t)
	register := func(id, name, addr string) {
		t.Helper()
		if err := agent.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
			ID: id, Name: name, Address: addr, Port: 8080, Meta: map[string]string{"protocol": "http"}}); err != nil {
			t.Fatal(err)
		}
	}
	register("web-1", "web", "10.0.0.1")
	register("web-2", "web", "10.0.0.2")
	register("api-1", "api", "10.0.1.1")

	xdsAddr, adminAddr := freeport.Addr(t), freeport.Addr(t)
	cfg := filepath.Join(t.TempDir(), "bridge.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
xds: {listen: %s}
admin: {listen: %s}
sources:
  - {name: consul, type: consul, address: %s, services: {exclude: [consul]}}
istio: {enabled: true, shape: %s}
`, xdsAddr, adminAddr, agent.HTTPAddr, shape))
	start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, 20*time.Second)

	// The collection that carries the endpoints: the one a NACK is tried on.
	endpointsIn := serviceEntries
	if shape == "workload_entries" {
		endpointsIn = workloadEntries
	}
	var nackNext atomic.Bool
	istiod := istiodsim.Dial(t, xdsAddr, istiodsim.Options{NACK: func(r *discoveryv3.DiscoveryResponse) string {
		if r.GetTypeUrl() == endpointsIn && nackNext.CompareAndSwap(true, false) {
			return "rejected by the test"
		}
		return ""
	}})
	serves := func(what string, want map[string][]string) {
		t.Helper()
		istiod.Wait(t, 20*time.Second, what, func() bool { return istiod.Synced() && slices.Equal(nil, diffIstio(istiod, want)) })
	}
	serves("web and api", map[string][]string{"web": {"10.0.0.1", "10.0.0.2"}, "api": {"10.0.1.1"}})
	// An instance change reaches istiod. How soon is logged, not asserted:
	// on a loaded machine any bound would be a guess (xdsload
	// istiod-consul measures it; docs/istio.md has the figures).
	changed := time.Now()
	register("web-3", "web", "10.0.0.3")
	serves("the third web instance", map[string][]string{"web": {"10.0.0.1", "10.0.0.2", "10.0.0.3"}, "api": {"10.0.1.1"}})
	t.Logf("an instance registered in Consul reached the istiod-like client %v later", time.Since(changed).Round(time.Millisecond))

	// /clients lists istiod's stream with its collections, everything
	// sent ACKed.
	status := func() xds.TypeStatus {
		var clients []xds.ClientStatus
		_, body := bridgetest.Get("http://" + adminAddr + "/clients")
		if err := json.Unmarshal([]byte(body), &clients); err != nil {
			t.Fatalf("/clients: %v: %s", err, body)
		}
		for _, c := range clients {
			for _, ts := range c.Types {
				if c.ID == "sidecar~10.0.0.9~istiod-0.istio-system~istio-system.svc.cluster.local" &&
					c.Variant == "sotw_ads" && ts.TypeURL == endpointsIn {
					return ts
				}
			}
		}
		t.Fatalf("/clients has no istiod stream with %s: %s", endpointsIn, body)
		return xds.TypeStatus{}
	}
	bridgetest.Eventually(t, 10*time.Second, "istiod's ACK in /clients", func() bool {
		ts := status()
		return ts.Wildcard && ts.AckedVersion == ts.LastVersion && ts.Held > 0
	})
	acked := status().AckedVersion

	// The response that removes web-2 is NACKed: istiod keeps what it had,
	// the bridge records the NACK and does not send that content again.
	nackNext.Store(true)
	if err := agent.Client().Agent().ServiceDeregister("web-2"); err != nil {
		t.Fatal(err)
	}
	bridgetest.Eventually(t, 20*time.Second, "the NACK in /clients", func() bool {
		ts := status()
		return ts.NACK != nil && ts.NACK.Version != acked && ts.AckedVersion == acked
	})
	if got := diffIstio(istiod, map[string][]string{"web": {"10.0.0.1", "10.0.0.2", "10.0.0.3"}, "api": {"10.0.1.1"}}); got != nil {
		t.Fatalf("after the NACK istiod's store changed: %v", got)
	}
	register("api-2", "api", "10.0.1.2")
	serves("the second api instance, and web without web-2", map[string][]string{
		"web": {"10.0.0.1", "10.0.0.3"}, "api": {"10.0.1.1", "10.0.1.2"}})
	// The response after the NACKed one is the next change, the whole
	// collection with api-2: the rejected content was not sent again.
	var ofType []istiodsim.Response
	for _, r := range istiod.Responses() {
		if r.TypeURL == endpointsIn {
			ofType = append(ofType, r)
		}
	}
	i := slices.IndexFunc(ofType, func(r istiodsim.Response) bool { return r.NACKed })
	if i < 0 || i+1 >= len(ofType) {
		t.Fatalf("no response after the NACKed one: %+v", ofType)
	}
	if next := ofType[i+1]; next.NACKed || !istiodsim.HasAddress(next.Resources, "10.0.1.2") {
		t.Fatalf("after the NACKed response %+v came %+v, not the change that added api-2", ofType[i], next)
	}
	bridgetest.Eventually(t, 10*time.Second, "the next change's ACK in /clients", func() bool {
		ts := status()
		return ts.AckedVersion == ts.LastVersion && ts.NACK != nil
	})
}

// diffIstio compares istiod's store with want (service -> endpoint
// addresses, in order) and returns the differences, nil if none.
func diffIstio(c *istiodsim.Client, want map[string][]string) []string {
	got := map[string][]string{}
	entries := c.Collection(serviceEntries)
	for name, r := range entries {
		se := r.Body.(*networkingv1alpha3.ServiceEntry)
		for _, ep := range se.GetEndpoints() {
			got[name] = append(got[name], ep.GetAddress())
		}
		if sel := se.GetWorkloadSelector(); sel != nil {
			for _, w := range c.Collection(workloadEntries) {
				we := w.Body.(*networkingv1alpha3.WorkloadEntry)
				if we.GetLabels()["xdsbridge/service"] == sel.GetLabels()["xdsbridge/service"] {
					got[name] = append(got[name], we.GetAddress())
				}
			}
		}
		slices.Sort(got[name])
	}
	var out []string
	for svc, addrs := range want {
		if g := got["xdsbridge/"+svc]; !slices.Equal(g, addrs) {
			out = append(out, fmt.Sprintf("%s: %v, want %v", svc, g, addrs))
		}
	}
	if len(entries) != len(want) {
		out = append(out, fmt.Sprintf("%d ServiceEntries, want %d", len(entries), len(want)))
	}
	return out
}

// TestDumpMCP: `bridge dump --mcp` prints, per collection, the
// DiscoveryResponse istiod would receive (here from the quickstart's
// services, whose configuration leaves istio disabled, which it notes).
func TestDumpMCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "dump", "--config", "../examples/quickstart/bridge.yaml", "--mcp", "--format", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bridge dump --mcp: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "istio.enabled is false") {
		t.Errorf("stderr does not note that istio is disabled: %q", stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	got := map[string][]string{}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		var resp discoveryv3.DiscoveryResponse
		if err := protojson.Unmarshal(raw, &resp); err != nil {
			t.Fatalf("not a DiscoveryResponse: %v\n%s", err, raw)
		}
		for _, a := range resp.GetResources() {
			var m mcpv1alpha1.Resource
			if err := a.UnmarshalTo(&m); err != nil {
				t.Fatal(err)
			}
			body, err := m.GetBody().UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			host := body.(*networkingv1alpha3.ServiceEntry).GetHosts()[0]
			got[resp.GetTypeUrl()] = append(got[resp.GetTypeUrl()], m.GetMetadata().GetName()+" "+host)
		}
		if _, ok := got[resp.GetTypeUrl()]; !ok {
			got[resp.GetTypeUrl()] = nil
		}
	}
	want := map[string][]string{
		serviceEntries: {"xdsbridge/api api.service.consul", "xdsbridge/payments payments.service.consul", "xdsbridge/web web.service.consul"},
		// The inline shape: no WorkloadEntries.
		workloadEntries: nil,
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("dumped %q, want %q", got, want)
	}
}
