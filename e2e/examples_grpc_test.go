package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/bridgetest"
	"github.com/xdsbridge/xdsbridge/internal/freeport"
)

// grpcExample is the directory of the proxyless gRPC example.
var grpcExample = filepath.Join(examples, "grpc")

// The lines of examples/grpc/services.yaml that its README's edit swaps:
// backend a is taken out, backend c put in.
const (
	grpcLineA      = "      - {address: 127.0.0.1, port: 50051}     # backend a"
	grpcLineAOut   = "      # - {address: 127.0.0.1, port: 50051}   # backend a"
	grpcLineCOut   = "      # - {address: 127.0.0.1, port: 50053}   # backend c"
	grpcLineC      = "      - {address: 127.0.0.1, port: 50053}     # backend c"
	grpcCallWindow = 20 // consecutive calls that must agree with a services file
)

// TestGRPCExample runs examples/grpc as its README does: the bridge on the
// example's bridge.yaml, the three example servers, the example client
// with the example bootstrap; then it makes the README's edit of
// services.yaml and watches the client's calls move from backends a and b
// to b and c, none failing on the way.
func TestGRPCExample(t *testing.T) {
	dir := t.TempDir()
	server, client := filepath.Join(dir, "server"), filepath.Join(dir, "client")
	for out, pkg := range map[string]string{server: "./examples/grpc/server", client: "./examples/grpc/client"} {
		if err := goBuild(out, "github.com/xdsbridge/xdsbridge/"+strings.TrimPrefix(pkg, "./")); err != nil {
			t.Fatal(err)
		}
	}
	// The servers pick free ports; the services file gets them in place of
	// the example's fixed ones.
	ports := []string{}
	for i, name := range []string{"a", "b", "c"} {
		p := startProgram(t, "server "+name, exec.Command(server, "--listen", "127.0.0.1:0", "--name", name), nil)
		line := p.waitLog(20*time.Second, "msg=serving", "backend="+name)
		addr := regexp.MustCompile(`addr=127\.0\.0\.1:(\d+)`).FindStringSubmatch(line)
		if addr == nil {
			t.Fatalf("server %s logged no address: %q", name, line)
		}
		ports = append(ports, fmt.Sprint(50051+i), addr[1])
	}
	xdsAddr, adminAddr := freeport.Addr(t), freeport.Addr(t)
	cfg := rewriteInto(t, dir, filepath.Join(grpcExample, "bridge.yaml"), "127.0.0.1:18000", xdsAddr, "127.0.0.1:19000", adminAddr)
	boot := rewriteInto(t, dir, filepath.Join(grpcExample, "bootstrap.json"), "127.0.0.1:18000", xdsAddr)
	shipped, err := os.ReadFile(filepath.Join(grpcExample, "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	edited := readmeEdit(t, string(shipped))
	services := filepath.Join(dir, "services.yaml")
	withPorts := strings.NewReplacer(ports...)
	writeFile(t, services, withPorts.Replace(string(shipped)))

	start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	c := startProgram(t, "client", exec.Command(client, "--interval", "50ms", "--timeout", "60s"), []string{"GRPC_XDS_BOOTSTRAP=" + boot})

	before := c.waitCalls(60*time.Second, "calls answered by a and b", only("a", "b"))
	editAt := len(calls(c.stdout.String()))
	writeFile(t, services, withPorts.Replace(edited))
	editedAt := time.Now()
	moved := c.waitCalls(30*time.Second, "calls answered by b and c after the edit", only("b", "c"))
	t.Logf("before the edit: %v; after: %v; %d calls answered only by b and c %s after the edit",
		before, moved, grpcCallWindow, time.Since(editedAt).Round(10*time.Millisecond))

	all := calls(c.stdout.String())
	if i := slices.Index(all[:editAt], "c"); i >= 0 {
		t.Errorf("call %d went to backend c before the edit put it in the services file", i+1)
	}
	if n := strings.Count(c.stdout.String(), " failed: "); n > 0 {
		t.Errorf("%d calls failed; the edit keeps b serving throughout:\n%s", n, c.stdout)
	}
}

// readmeEdit makes the edit of services.yaml that examples/grpc/README.md
// shows: backend a commented out, backend c in.
func readmeEdit(t *testing.T, services string) string {
	t.Helper()
	if !strings.Contains(services, grpcLineA+"\n") || !strings.Contains(services, grpcLineCOut+"\n") {
		t.Fatalf("examples/grpc/services.yaml lacks the lines its README edits:\n%s", services)
	}
	return strings.NewReplacer(grpcLineA, grpcLineAOut, grpcLineCOut, grpcLineC).Replace(services)
}

var callLine = regexp.MustCompile(`(?m)^call \d+ (?:answered by (\S+) |failed: )`)

// calls lists, in order, the backend that answered each call the example
// client printed ("" for a failed call).
func calls(stdout string) []string {
	var out []string
	for _, m := range callLine.FindAllStringSubmatch(stdout, -1) {
		out = append(out, m[1])
	}
	return out
}

// only is true of a window of calls answered by exactly the backends
// given, each of them at least once.
func only(backends ...string) func([]string) bool {
	return func(window []string) bool {
		for _, b := range window {
			if !slices.Contains(backends, b) {
				return false
			}
		}
		for _, b := range backends {
			if !slices.Contains(window, b) {
				return false
			}
		}
		return true
	}
}

// waitCalls waits until the last grpcCallWindow calls the client printed
// satisfy ok, and returns them.
func (p *process) waitCalls(timeout time.Duration, what string, ok func([]string) bool) []string {
	p.t.Helper()
	var window []string
	bridgetest.Eventually(p.t, timeout, what, func() bool {
		all := calls(p.stdout.String())
		if len(all) < grpcCallWindow {
			return false
		}
		window = all[len(all)-grpcCallWindow:]
		return ok(window)
	})
	return window
}
