// Package cutover_test runs the weighted-cutover example end to end: the
// bridge in-process with its DNS source against CoreDNS and its Consul
// source against a Consul agent, and grpc-go's own xDS client sending RPCs
// whose split between the two registries' backends is measured.
package cutover_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
	_ "github.com/xdsbridge/xdsbridge/plugins"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
)

const example = "../../examples/migration/weighted-cutover/bridge.yaml"

// TestWeightedCutover checks the weighted merge end to end: 1,000
// RPCs split 90/10 within 5 points between the DNS and the Consul backends,
// and a new split in the configuration moves the traffic.
func TestWeightedCutover(t *testing.T) {
	// The whole run's bound is a failure detector: thousands of RPCs
	// through a race-built bridge on a loaded machine take minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*bridgetest.Patience)
	defer cancel()

	addrs, ports := grpcxdstest.Backends(t, 4)
	legacy := map[string]bool{addrs[0]: true, addrs[1]: true} // DNS; addrs[2:] are in Consul

	dns := dnstest.Start(t, "example.org", fmt.Sprintf(
		"legacy 5 IN A 127.0.0.1\n_web._tcp 5 IN SRV 10 10 %d legacy\n_web._tcp 5 IN SRV 10 10 %d legacy\n", ports[0], ports[1]))
	agent := consultest.Start(t)
	for i, p := range ports[2:] {
		reg := &api.AgentServiceRegistration{ID: fmt.Sprint("web-", i), Name: "web", Address: "127.0.0.1", Port: int(p)}
		if err := agent.Client().Agent().ServiceRegister(reg); err != nil {
			t.Fatal(err)
		}
	}

	text, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.NewReplacer(
		"127.0.0.1:18000", "127.0.0.1:0",
		"127.0.0.1:19000", "127.0.0.1:0",
		"127.0.0.1:5353", dns.Addr,
		"127.0.0.1:8500", agent.HTTPAddr,
	).Replace(string(text))
	dir := t.TempDir()
	path := filepath.Join(dir, "bridge.yaml")
	in := bridgetest.StartIn(t, dir, yaml, io.Discard)
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)
	client := grpcxdstest.Dial(t, in.XDSAddr().String(), "cutover-test", "web")

	runSteps(ctx, t, in, client, legacy, path, yaml)
}

// TestWeightedCutoverFiles is the same cutover between two file sources,
// which needs no registry servers: it pins that grpc-go accepts and honours
// the weighted assignment and cluster wherever CoreDNS or Consul are not
// installed.
func TestWeightedCutoverFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*bridgetest.Patience)
	defer cancel()
	addrs, ports := grpcxdstest.Backends(t, 4)
	legacy := map[string]bool{addrs[0]: true, addrs[1]: true}
	dir := t.TempDir()
	for name, ps := range map[string][]uint32{"legacy.yaml": ports[:2], "consul.yaml": ports[2:]} {
		doc := fmt.Sprintf("services:\n  - name: web\n    endpoints:\n      - {address: 127.0.0.1, port: %d}\n      - {address: 127.0.0.1, port: %d}\n", ps[0], ps[1])
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	yaml := fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - {name: legacy-dns, type: file, path: %q}
  - {name: consul, type: file, path: %q}
merge:
  services:
    - service: web
      mode: weighted
      weights:
        - {source: legacy-dns, weight: 90}
        - {source: consul, weight: 10}
`, filepath.Join(dir, "legacy.yaml"), filepath.Join(dir, "consul.yaml"))
	path := filepath.Join(dir, "bridge.yaml")
	in := bridgetest.StartIn(t, dir, yaml, io.Discard)
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)
	client := grpcxdstest.Dial(t, in.XDSAddr().String(), "cutover-test", "web")
	runSteps(ctx, t, in, client, legacy, path, yaml)
}

// runSteps moves the weights of the configuration yaml through 90/10,
// 10/90, 50/50 and 0/100 and checks, at each step, that 1,000 RPCs split
// within 5 points of the weights between the legacy backends and the rest.
func runSteps(ctx context.Context, t *testing.T, in *bridge.Instance, client *grpcxdstest.Client, legacy map[string]bool, path, yaml string) {
	t.Helper()
	// legacyShare makes n RPCs and returns the share that reached the
	// legacy backends.
	legacyShare := func(n int) float64 {
		hits := client.Hits(ctx, n)
		l := 0
		for a, c := range hits {
			if legacy[a] {
				l += c
			}
		}
		return float64(l) / float64(n)
	}
	// measure waits until a batch of 100 RPCs is near want (the client has
	// the new weights), then returns the share over 1,000 RPCs.
	measure := func(want float64) float64 {
		t.Helper()
		last, near := -1.0, false
		defer func() {
			if !near { // Eventually failed the test
				t.Logf("the last batch of 100 RPCs sent %.2f to the legacy backends", last)
			}
		}()
		bridgetest.Eventually(t, bridgetest.Patience, fmt.Sprintf("the split to approach %.2f", want), func() bool {
			last = legacyShare(100)
			return last >= want-0.15 && last <= want+0.15
		})
		near = true
		return legacyShare(1000)
	}
	steps := []struct{ legacy, consul int }{{90, 10}, {10, 90}, {50, 50}, {0, 100}}
	for i, st := range steps {
		if i > 0 {
			setWeights(ctx, t, in, path, yaml, st.legacy, st.consul)
		}
		want := float64(st.legacy) / 100
		// The client picks at random, so at 50/50 five points is about
		// three standard deviations of 1,000 RPCs: a correct split misses
		// it once in several hundred steps. A miss is measured once more,
		// and only a second miss fails: wrong weights miss both times, a
		// correct split both times a few times in a million.
		near := func(got float64) bool {
			t.Logf("weights legacy-dns %d / consul %d: %.1f %% of 1000 RPCs to the legacy backends", st.legacy, st.consul, 100*got)
			return got >= want-0.05 && got <= want+0.05
		}
		if got := measure(want); !near(got) && !near(measure(want)) {
			t.Errorf("weights %d/%d: legacy share %.3f, then again outside, want %.2f ± 0.05", st.legacy, st.consul, got, want)
		}
	}
}

// setWeights edits the weights of the configuration file at path (whose
// original text is yaml) as an operator would, and reloads the running
// bridge with it, as SIGHUP does: no source restarts.
func setWeights(ctx context.Context, t *testing.T, in *bridge.Instance, path, yaml string, legacy, consul int) {
	t.Helper()
	edited := strings.NewReplacer(
		"{source: legacy-dns, weight: 90}", fmt.Sprintf("{source: legacy-dns, weight: %d}", legacy),
		"{source: consul, weight: 10}", fmt.Sprintf("{source: consul, weight: %d}", consul),
	).Replace(yaml)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := in.Reload(ctx, func() (*config.Config, error) { return config.Load(path, nil) })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Started) > 0 || len(res.Stopped) > 0 {
		t.Errorf("a change of weights restarted sources: %+v", res)
	}
}
