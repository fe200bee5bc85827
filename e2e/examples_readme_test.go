package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// readmeCommands returns the commands of the ```sh blocks of the README of
// the example dir, one a line, without their trailing comments.
func readmeCommands(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examples, dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for l := range strings.Lines(string(data)) {
		l = strings.TrimSpace(l)
		switch {
		case l == "```sh":
			in = true
		case strings.HasPrefix(l, "```"):
			in = false
		case in && l != "":
			if i := strings.Index(l, "  #"); i >= 0 {
				l = strings.TrimSpace(l[:i])
			}
			out = append(out, l)
		}
	}
	return out
}

// withPrefix returns the commands that start with prefix, each split into
// its words after the prefix.
func withPrefix(cmds []string, prefix string) [][]string {
	var out [][]string
	for _, c := range cmds {
		if rest, ok := strings.CutPrefix(c, prefix); ok {
			out = append(out, strings.Fields(rest))
		}
	}
	return out
}

// TestExampleReadmes checks that every example has a README with commands
// to run, that names the ports its bridge listens on (every example uses
// the same ones), and whose commands name files that exist.
func TestExampleReadmes(t *testing.T) {
	entries, err := os.ReadDir(examples)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			readme, err := os.ReadFile(filepath.Join(examples, e.Name(), "README.md"))
			if err != nil {
				t.Fatalf("no README: %v", err)
			}
			cmds := readmeCommands(t, e.Name())
			if len(cmds) == 0 {
				t.Fatal("the README gives no commands (a ```sh block)")
			}
			for _, c := range cmds {
				for w := range strings.FieldsSeq(c) {
					if strings.HasPrefix(w, "examples/") && !strings.ContainsAny(w, "$*") {
						if _, err := os.Stat(filepath.Join("..", w)); err != nil {
							t.Errorf("%q names %s, which does not exist", c, w)
						}
					}
				}
			}
			data, err := os.ReadFile(filepath.Join(examples, e.Name(), "bridge.yaml"))
			if os.IsNotExist(err) {
				return
			}
			var cfg struct {
				XDS   struct{ Listen string }
				Admin struct{ Listen string }
			}
			if err != nil || yaml.Unmarshal(data, &cfg) != nil {
				t.Fatalf("bridge.yaml: %v", err)
			}
			for _, addr := range []string{cfg.XDS.Listen, cfg.Admin.Listen} {
				_, port, _ := net.SplitHostPort(addr)
				if port == "" || !strings.Contains(string(readme), port) {
					t.Errorf("the README does not say the bridge listens on %s", addr)
				}
			}
		})
	}
}

// TestQuickstartBackend runs the backend command of the quick start's
// README: it must serve web at the addresses services.yaml gives web's
// endpoints, the backends an Envoy routes to. It runs on free ports with
// the same arguments otherwise.
func TestQuickstartBackend(t *testing.T) {
	runs := withPrefix(readmeCommands(t, "quickstart"), "go run ./examples/quickstart/backend")
	if len(runs) != 1 {
		t.Fatalf("the quick start's README runs the backend %d times, want once", len(runs))
	}
	var services struct {
		Services []struct {
			Name      string
			Endpoints []struct {
				Address string
				Port    int
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(examples, "quickstart", "services.yaml"))
	if err != nil || yaml.Unmarshal(data, &services) != nil {
		t.Fatalf("services.yaml: %v", err)
	}
	var web []string
	for _, s := range services.Services {
		if s.Name == "web" {
			for _, e := range s.Endpoints {
				web = append(web, net.JoinHostPort(e.Address, fmt.Sprint(e.Port)))
			}
		}
	}
	if !slices.Equal(runs[0], web) {
		t.Fatalf("the README's backend serves %q, web's endpoints are %q", runs[0], web)
	}
	bin := filepath.Join(t.TempDir(), "backend")
	if err := goBuild(bin, "github.com/xdsbridge/xdsbridge/examples/quickstart/backend"); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for range web {
		addrs = append(addrs, freeport.Addr(t))
	}
	startProgram(t, "backend", exec.Command(bin, addrs...), nil)
	for _, a := range addrs {
		bridgetest.Eventually(t, patience, "the backend to answer on "+a, func() bool {
			code, body := bridgetest.Get("http://" + a + "/")
			return code == 200 && strings.Contains(body, "web answered from "+a)
		})
	}
}

// registerFromReadme starts a Consul agent and runs on it the `consul
// services register` commands of the README of the example dir, with the
// real consul binary, after checking that the README starts the agent the
// way the test does (a development agent).
func registerFromReadme(t *testing.T, dir string) *consultest.Agent {
	t.Helper()
	cmds := readmeCommands(t, dir)
	if !slices.Contains(cmds, "consul agent -dev") {
		t.Fatalf("the %s README does not start a development agent (consul agent -dev): %q", dir, cmds)
	}
	regs := withPrefix(cmds, "consul services register ")
	if len(regs) == 0 {
		t.Fatalf("the %s README registers no service", dir)
	}
	agent := consultest.Start(t)
	for _, args := range regs {
		cmd := exec.Command(consultest.Binary(t), append([]string{"services", "register"}, args...)...)
		cmd.Env = append(os.Environ(), "CONSUL_HTTP_ADDR="+agent.HTTPAddr)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("consul services register %q: %v\n%s", args, err, out)
		}
	}
	// The README dumps right after registering: so does the test.
	dumps := withPrefix(cmds, "go run ./cmd/bridge dump ")
	if len(dumps) != 1 || dumps[0][0] != filepath.ToSlash(filepath.Join("examples", dir, "bridge.yaml")) {
		t.Fatalf("the %s README dumps %q, want its bridge.yaml once", dir, dumps)
	}
	return agent
}
