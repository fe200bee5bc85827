package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// TestInvalidConfig checks that an invalid configuration makes validate and
// run both exit 2 with a message naming the key.
func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	good := "sources:\n  - {name: static, type: file, path: services.yaml}\n"
	cases := []struct {
		name, yaml, key string
	}{
		{"unknown key", "xds: {listen: '127.0.0.1:0', bogus: 1}\n" + good, "xds.bogus: unknown key"},
		{"unknown source type", good + "  - {name: other, type: foo}\n", `sources[1].type: unknown source type "foo" (known: `},
		{"duplicate source name", good + "  - {name: static, type: file, path: other.yaml}\n", `sources[1].name: duplicate source name "static"`},
		{"invalid listen address", "xds: {listen: x}\n" + good, `xds.listen: invalid address "x"`},
		{"invalid admin address", "admin: {listen: '127.0.0.1:http-alt'}\n" + good, "admin.listen: invalid address"},
		{"unknown source key", "sources:\n  - {name: static, type: file, path: s.yaml, colour: red}\n", "sources[0].colour: unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := filepath.Join(dir, "bridge.yaml")
			if err := os.WriteFile(cfg, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"validate", "run"} {
				code, out := runBinary(t, 30*time.Second, cmd, "--config", cfg)
				if code != 2 || !strings.Contains(out, c.key) {
					t.Errorf("bridge %s: exit %d, output %q; want exit 2 naming %q", cmd, code, out, c.key)
				}
			}
		})
	}
}

func TestValidateOK(t *testing.T) {
	code, out := runBinary(t, 30*time.Second, "validate", "--config", filepath.Join("..", "examples", "quickstart", "bridge.yaml"))
	if code != 0 || !strings.Contains(out, "config OK") || !strings.Contains(out, "static (file)") {
		t.Errorf("validate quickstart: exit %d, output %q", code, out)
	}
	code, out = runBinary(t, 30*time.Second, "validate", "--config", filepath.Join("..", "examples", "quickstart", "bridge.yaml"),
		"--xds-listen", "nonsense")
	if code != 2 || !strings.Contains(out, `xds.listen: invalid address "nonsense"`) {
		t.Errorf("validate with a bad --xds-listen: exit %d, output %q", code, out)
	}
}

func TestUsage(t *testing.T) {
	if code, out := runBinary(t, 30*time.Second, "version"); code != 0 || !strings.Contains(out, "xdsbridge dev (go") {
		t.Errorf("version: exit %d, output %q", code, out)
	}
	if code, out := runBinary(t, 30*time.Second, "run"); code != 2 || !strings.Contains(out, "a configuration file is required: bridge run FILE (or --config FILE)") {
		t.Errorf("run without a configuration: exit %d, output %q", code, out)
	}
	if code, out := runBinary(t, 30*time.Second, "run", "--config", "/nonexistent/bridge.yaml"); code != 2 || !strings.Contains(out, "/nonexistent/bridge.yaml") {
		t.Errorf("run with a missing config file: exit %d, output %q", code, out)
	}
}

// TestListenInUse checks a runtime failure (the xDS port is taken) exits 1
// with an error naming the key.
func TestListenInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bridge.yaml")
	writeFile(t, filepath.Join(dir, "services.yaml"), "services: []\n")
	writeFile(t, cfg, "xds: {listen: '"+taken.Addr().String()+"'}\nadmin: {listen: '"+freeport.Addr(t)+"'}\n"+
		"sources:\n  - {name: static, type: file, path: services.yaml}\n")
	code, out := runBinary(t, 30*time.Second, "run", "--config", cfg)
	if code != 1 || !strings.Contains(out, "xds.listen: listen tcp "+taken.Addr().String()) {
		t.Errorf("run with the xDS port taken: exit %d, output %q", code, out)
	}
}
