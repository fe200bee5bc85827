package e2e

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/dockerfile"
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

// TestConsulExample runs the commands of examples/consul/README.md: a
// real Consul agent, the services it registers with the consul CLI, and a
// dump of examples/consul/bridge.yaml: the Consul source, listed first,
// serves web; the quickstart's file source serves the services Consul does
// not have.
func TestConsulExample(t *testing.T) {
	config := filepath.Join(examples, "consul", "bridge.yaml")
	validate(t, config)
	agent := registerFromReadme(t, "consul")
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

// TestDNSExample runs the commands of examples/dns/README.md: a real
// Consul agent, the services it registers with the consul CLI, and a dump
// of examples/dns/bridge.yaml against the agent's DNS interface, the server
// the example names: web from SRV records (address and port of each
// instance), api from A records and the example's port.
func TestDNSExample(t *testing.T) {
	config := filepath.Join(examples, "dns", "bridge.yaml")
	validate(t, config)
	agent := registerFromReadme(t, "dns")
	d := dump(t, rewrite(t, config, "127.0.0.1:8600", agent.DNSAddr))
	if got := addresses(d.assignments["web"]); !slices.Equal(got, []string{"10.0.5.1:8080", "10.0.5.2:8081"}) {
		t.Errorf("web endpoints %v, want the SRV records' targets and ports", got)
	}
	if got := addresses(d.assignments["api"]); !slices.Equal(got, []string{"10.0.6.1:8080"}) {
		t.Errorf("api endpoints %v, want the A record on the example's port 8080", got)
	}
}

// TestComposeExample dumps the compose example's bridge.yaml against a
// real Consul agent (the compose file's version) loading the compose
// example's consul-services.json as the consul container does
// (-config-dir): the one service it registers is served at its address.
// Then it runs the consul container's healthcheck command against that
// agent: it passes while the agent runs and fails once it stopped.
func TestComposeExample(t *testing.T) {
	dir := filepath.Join(examples, "compose")
	config := filepath.Join(dir, "bridge.yaml")
	validate(t, config)
	confDir := t.TempDir()
	rewriteInto(t, confDir, filepath.Join(dir, "consul-services.json"))
	agent := consultest.Start(t, consultest.WithArgs("-config-dir", confDir))
	// The agent registers the file's services in the catalog by its
	// anti-entropy sync, shortly after it has a leader.
	bridgetest.Eventually(t, patience, "the catalog to list web", func() bool {
		svcs, _, err := agent.Client().Catalog().Service("web", "", nil)
		return err == nil && len(svcs) == 1
	})
	d := dump(t, rewrite(t, config, "consul:8500", agent.HTTPAddr))
	if got := addresses(d.assignments["web"]); !slices.Equal(got, []string{"172.28.0.10:8080"}) {
		t.Errorf("web endpoints %v, want the hello container's address from consul-services.json", got)
	}

	hc := readCompose(t).Services["consul"].Healthcheck
	if hc == nil {
		t.Fatal("the consul service has no healthcheck")
	}
	test := hc.Test
	if len(test) < 2 || test[0] != "CMD" || test[1] != "consul" {
		t.Fatalf("consul healthcheck %q, want [CMD consul ...] (the image has no shell or curl)", test)
	}
	check := func() error {
		// In the container the agent is the CLI's default address; here
		// the environment points the CLI at the test's agent.
		cmd := exec.Command(consultest.Binary(t), test[2:]...)
		cmd.Env = append(os.Environ(), "CONSUL_HTTP_ADDR="+agent.HTTPAddr)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if err := check(); err != nil {
		t.Errorf("consul healthcheck %q against a running agent: %v", test, err)
	}
	agent.Stop()
	if err := check(); err == nil {
		t.Errorf("consul healthcheck %q passes with the agent stopped", test)
	}
}

// compose is what the tests read of examples/compose/docker-compose.yaml.
type compose struct {
	Services map[string]struct {
		Build *struct {
			Context, Dockerfile string
		}
		Healthcheck *struct {
			Test []string
		}
		DependsOn yaml.Node `yaml:"depends_on"`
		Ports     []string
	}
}

func readCompose(t *testing.T) compose {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examples, "compose", "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestComposeWaitsForHealth checks that in the compose example every
// service starts only once what it depends on is healthy, and that each
// dependency has a health check: its own in the compose file, or the
// HEALTHCHECK of the Dockerfile it is built from, which must run `bridge
// healthcheck`.
func TestComposeWaitsForHealth(t *testing.T) {
	c := readCompose(t)
	waited := 0
	for name, svc := range c.Services {
		if svc.DependsOn.IsZero() {
			continue
		}
		var deps map[string]struct{ Condition string }
		if err := svc.DependsOn.Decode(&deps); err != nil {
			t.Errorf("%s: depends_on is not a map of conditions (a list waits only for the start): %v", name, err)
			continue
		}
		for dep, cond := range deps {
			waited++
			if cond.Condition != "service_healthy" {
				t.Errorf("%s: depends_on %s with condition %q, want service_healthy", name, dep, cond.Condition)
			}
			d, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s: depends on %s, which is not a service", name, dep)
			case d.Healthcheck != nil:
			case d.Build != nil:
				checkImageHealthcheck(t, filepath.Join(examples, "compose", d.Build.Context, d.Build.Dockerfile))
			default:
				t.Errorf("%s: depends on %s, which has no health check", name, dep)
			}
		}
	}
	if waited < 2 {
		t.Errorf("%d dependencies, want the bridge on Consul and Envoy on the bridge", waited)
	}
}

// checkImageHealthcheck checks that the image the Dockerfile at path builds
// declares a HEALTHCHECK running `bridge healthcheck`.
func checkImageHealthcheck(t *testing.T, path string) {
	t.Helper()
	f, err := dockerfile.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	hc := f.Final().All("HEALTHCHECK")
	if len(hc) != 1 {
		t.Fatalf("%s: %d HEALTHCHECK instructions in the final stage, want 1", path, len(hc))
	}
	argv, err := hc[0].Exec()
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) < 2 || filepath.Base(argv[0]) != "bridge" || argv[1] != "healthcheck" {
		t.Errorf("%s: HEALTHCHECK runs %q, want bridge healthcheck", path, argv)
	}
}

// TestHealthcheckHelpNamesTheImagesPath checks that `bridge healthcheck
// --help`, which shows the HEALTHCHECK line for an image, gives the path
// the repository's image installs the bridge at.
func TestHealthcheckHelpNamesTheImagesPath(t *testing.T) {
	f, err := dockerfile.Parse(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	hc := f.Final().All("HEALTHCHECK")
	if len(hc) != 1 {
		t.Fatalf("%d HEALTHCHECK instructions, want 1", len(hc))
	}
	argv, err := hc[0].Exec()
	if err != nil || len(argv) < 2 {
		t.Fatalf("HEALTHCHECK %q: %v", argv, err)
	}
	code, out := runBinary(t, 30*time.Second, "healthcheck", "--help")
	want := fmt.Sprintf("[%q, %q]", argv[0], argv[1])
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("bridge healthcheck --help (exit %d) does not show %s:\n%s", code, want, out)
	}
}

// TestComposePublishesAdminOnLoopback checks that the compose example
// publishes on every interface of the host only the ports that carry
// traffic (the bridge's xDS port, Envoy's listeners), and every other one
// (the admin APIs of Consul, the bridge and Envoy, none of which asks for a
// token there) on its loopback; and that the example's files speak of its
// own services, not of another example's.
func TestComposePublishesAdminOnLoopback(t *testing.T) {
	dir := filepath.Join(examples, "compose")
	public := map[string]bool{}
	var cfg struct{ XDS struct{ Listen string } }
	data, err := os.ReadFile(filepath.Join(dir, "bridge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	_, xdsPort, _ := strings.Cut(cfg.XDS.Listen, ":")
	public[xdsPort] = true
	for _, l := range bootstrap(t, filepath.Join(dir, "envoy.yaml")).GetStaticResources().GetListeners() {
		public[fmt.Sprint(l.GetAddress().GetSocketAddress().GetPortValue())] = true
	}
	published := 0
	for name, svc := range readCompose(t).Services {
		for _, p := range svc.Ports {
			published++
			f := strings.Split(p, ":")
			container := f[len(f)-1]
			switch {
			case public[container] && len(f) == 2:
			case len(f) == 3 && f[0] == "127.0.0.1":
			default:
				t.Errorf("%s publishes %q: want 127.0.0.1:HOST:%s (only %v are published on every interface)", name, p, container, public)
			}
		}
	}
	if published < 4 {
		t.Errorf("%d published ports, want Consul's, the bridge's two and Envoy's two", published)
	}
	for _, f := range []string{"docker-compose.yaml", "envoy.yaml", "bridge.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ToLower(string(data)), "quickstart") {
			t.Errorf("%s speaks of the quickstart: the compose example serves what consul-services.json registers", f)
		}
	}
}
