package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/bridgetest"
	"github.com/xdsbridge/xdsbridge/internal/consultest"
)

// examples is the examples directory.
var examples = filepath.Join("..", "examples")

// quickstartServices is the absolute path of the quickstart's services
// file, which other examples name relatively (../quickstart/services.yaml):
// their copies in a temporary directory name it absolutely.
func quickstartServices(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(examples, "quickstart", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConsulExample dumps examples/consul/bridge.yaml against a real Consul
// agent: the Consul source, listed first, serves web; the quickstart's file
// source serves the services Consul does not have.
func TestConsulExample(t *testing.T) {
	config := filepath.Join(examples, "consul", "bridge.yaml")
	validate(t, config)
	agent := consultest.Start(t)
	register(t, agent.Client(), "web-1", "web", "10.0.5.1", 8080)
	register(t, agent.Client(), "web-2", "web", "10.0.5.2", 8080)
	d := dump(t, rewriteInto(t, t.TempDir(), config, "127.0.0.1:8500", agent.HTTPAddr, "../quickstart/services.yaml", quickstartServices(t)))
	if got := addresses(d.assignments["web"]); !slices.Equal(got, []string{"10.0.5.1:8080", "10.0.5.2:8080"}) {
		t.Errorf("web endpoints %v, want Consul's (the consul source is listed first)", got)
	}
	if got := addresses(d.assignments["api"]); !slices.Equal(got, []string{"127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9101"}) {
		t.Errorf("api endpoints %v, want the quickstart file's", got)
	}
	if d.clusters["payments"] == nil || d.clusters["consul"] != nil {
		t.Errorf("clusters %v, want payments from the file and no consul (mesh and the agent itself are left out)", slices.Sorted(maps.Keys(d.clusters)))
	}
}

// TestDNSExample dumps examples/dns/bridge.yaml against the DNS interface
// of a real Consul agent, the server the example names: web from SRV
// records (address and port of each instance), api from A records and the
// example's port.
func TestDNSExample(t *testing.T) {
	config := filepath.Join(examples, "dns", "bridge.yaml")
	validate(t, config)
	agent := consultest.Start(t)
	register(t, agent.Client(), "web-1", "web", "10.0.5.1", 8080)
	register(t, agent.Client(), "web-2", "web", "10.0.5.2", 8081)
	register(t, agent.Client(), "api-1", "api", "10.0.6.1", 9999)
	d := dump(t, rewrite(t, config, "127.0.0.1:8600", agent.DNSAddr))
	if got := addresses(d.assignments["web"]); !slices.Equal(got, []string{"10.0.5.1:8080", "10.0.5.2:8081"}) {
		t.Errorf("web endpoints %v, want the SRV records' targets and ports", got)
	}
	if got := addresses(d.assignments["api"]); !slices.Equal(got, []string{"10.0.6.1:8080"}) {
		t.Errorf("api endpoints %v, want the A record on the example's port 8080", got)
	}
}

// TestComposeExampleBridge dumps the compose example's bridge.yaml against
// a real Consul agent (the compose file's version) loading the compose
// example's consul-services.json as the consul container does
// (-config-dir): the one service it registers is served at its address.
func TestComposeExampleBridge(t *testing.T) {
	dir := filepath.Join(examples, "compose")
	config := filepath.Join(dir, "bridge.yaml")
	validate(t, config)
	confDir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(dir, "consul-services.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "services.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	agent := consultest.Start(t, consultest.WithArgs("-config-dir", confDir))
	// The agent registers the file's services in the catalog by its
	// anti-entropy sync, shortly after it has a leader.
	bridgetest.Eventually(t, 30*time.Second, "the catalog to list web", func() bool {
		svcs, _, err := agent.Client().Catalog().Service("web", "", nil)
		return err == nil && len(svcs) == 1
	})
	d := dump(t, rewrite(t, config, "consul:8500", agent.HTTPAddr))
	if got := addresses(d.assignments["web"]); !slices.Equal(got, []string{"172.28.0.10:8080"}) {
		t.Errorf("web endpoints %v, want the hello container's address from consul-services.json", got)
	}
}
