package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/xds"
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
// to b and c, none failing on the way. The client's own xDS client, asked
// through CSDS, ACKed every resource of the chain at the version the
// bridge's /clients records as ACKed, before the edit and after it.
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
	c := startProgram(t, "client", exec.Command(client, "--interval", "50ms", "--timeout", "60s", "--csds", "127.0.0.1:0"), []string{"GRPC_XDS_BOOTSTRAP=" + boot})
	csds := c.csdsAddr()

	before := c.waitCalls(60*time.Second, "calls answered by a and b", only("a", "b"))
	acked := waitACKed(t, csds, adminAddr, "grpc-client-1")
	editAt := len(calls(c.stdout.String()))
	writeFile(t, services, withPorts.Replace(edited))
	editedAt := time.Now()
	moved := c.waitCalls(30*time.Second, "calls answered by b and c after the edit", only("b", "c"))
	if now := waitACKed(t, csds, adminAddr, "grpc-client-1"); now[edsKey("greeter")].Version == acked[edsKey("greeter")].Version {
		t.Errorf("after the edit the client still holds the assignment of version %s", acked[edsKey("greeter")].Version)
	}
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

// TestGRPCExampleNACK: a cluster grpc-go rejects (an Envoy-style TLS
// transport socket, where grpc-go wants certificate-provider instances),
// served by a shaping rule to every client. The client's xDS client says
// through CSDS that it NACKed the cluster, with the error and the version
// it rejected, while it ACKed the listener and route; the bridge's
// /clients shows the same NACK: the version, and the error (which the
// NACK's error_detail prefixes with the response and resource names).
func TestGRPCExampleNACK(t *testing.T) {
	dir := t.TempDir()
	client := filepath.Join(dir, "client")
	if err := goBuild(client, "github.com/xdsbridge/xdsbridge/examples/grpc/client"); err != nil {
		t.Fatal(err)
	}
	xdsAddr, adminAddr := freeport.Addr(t), freeport.Addr(t)
	cfg := rewriteInto(t, dir, filepath.Join(grpcExample, "bridge.yaml"), "127.0.0.1:18000", xdsAddr, "127.0.0.1:19000", adminAddr)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(`clusters:
  - clients: all
    cluster:
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
          common_tls_context: {validation_context: {trusted_ca: {filename: /etc/ssl/certs/ca.pem}}}
`)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	services, err := os.ReadFile(filepath.Join(grpcExample, "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "services.yaml"), string(services))
	boot := rewriteInto(t, dir, filepath.Join(grpcExample, "bootstrap.json"), "127.0.0.1:18000", xdsAddr)
	start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	c := startProgram(t, "client", exec.Command(client, "--interval", "200ms", "--timeout", "1s", "--csds", "127.0.0.1:0"), []string{"GRPC_XDS_BOOTSTRAP=" + boot})
	csds := c.csdsAddr()

	var got map[grpcxdstest.Key]grpcxdstest.ResourceStatus
	var nack *xds.NACKStatus
	bridgetest.Eventually(t, patience, "the client to NACK the cluster, in CSDS and in /clients", func() bool {
		got = clientStatus(t, csds)
		nack = typeStatus(t, adminAddr, "grpc-client-1", xds.ClusterType).NACK
		return got[grpcxdstest.Key{TypeURL: xds.ClusterType, Name: "greeter"}].Status == "NACKED" && nack != nil
	})
	cl := got[grpcxdstest.Key{TypeURL: xds.ClusterType, Name: "greeter"}]
	if !strings.Contains(cl.Error, "ca_certificate_provider_instance") || !strings.HasSuffix(nack.Error, cl.Error) || cl.ErrorVersion != nack.Version || cl.Version != "" {
		t.Errorf("CSDS has the cluster %+v, /clients the NACK %+v; want the same error, about the certificate provider, of the same version, and no version accepted", cl, nack)
	}
	for _, typ := range []string{xds.ListenerType, xds.RouteType} {
		n := 0
		for k, st := range got {
			if k.TypeURL == typ {
				n++
				if st.Status != "ACKED" {
					t.Errorf("CSDS has %s %s %+v, want ACKED", typ, k.Name, st)
				}
			}
		}
		if n != 1 {
			t.Errorf("CSDS has %d resources of %s, want 1: %v", n, typ, got)
		}
	}
	if n := len(calls(c.stdout.String())); n > 0 && !strings.Contains(c.stdout.String(), " failed: ") {
		t.Errorf("calls through a rejected cluster succeeded:\n%s", c.stdout)
	}
}

// csdsAddr is the address the example client serves CSDS on, which it
// logs.
func (p *process) csdsAddr() string {
	p.t.Helper()
	line := p.waitLog(20*time.Second, "CSDS on ")
	return strings.TrimSpace(line[strings.Index(line, "CSDS on ")+len("CSDS on "):])
}

// clientStatus is what the client serving CSDS on addr reports.
func clientStatus(t *testing.T, addr string) map[grpcxdstest.Key]grpcxdstest.ResourceStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := grpcxdstest.ClientStatus(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// typeStatus is node's stream's state of typ in the bridge's /clients
// (zero if the node has none).
func typeStatus(t *testing.T, adminAddr, node, typ string) xds.TypeStatus {
	t.Helper()
	var clients []xds.ClientStatus
	if _, body := bridgetest.Get("http://" + adminAddr + "/clients"); json.Unmarshal([]byte(body), &clients) != nil {
		t.Fatalf("/clients: %s", body)
	}
	for _, c := range clients {
		for _, ts := range c.Types {
			if c.ID == node && ts.TypeURL == typ {
				return ts
			}
		}
	}
	return xds.TypeStatus{}
}

func edsKey(name string) grpcxdstest.Key {
	return grpcxdstest.Key{TypeURL: xds.EndpointType, Name: name}
}

// waitACKed waits until the client serving CSDS on csds reports one
// resource of each type of the proxyless chain (Listener, Route, Cluster,
// ClusterLoadAssignment), each ACKED at the version the bridge's /clients
// records node as having ACKed for that type, and returns what it reports.
func waitACKed(t *testing.T, csds, adminAddr, node string) map[grpcxdstest.Key]grpcxdstest.ResourceStatus {
	t.Helper()
	var got map[grpcxdstest.Key]grpcxdstest.ResourceStatus
	var problem string
	defer func() { // also when Eventually gives up (runtime.Goexit runs it)
		if problem != "" {
			t.Logf("CSDS and /clients last disagreed%s", problem)
		}
	}()
	bridgetest.Eventually(t, patience, "CSDS and /clients to agree on what the client ACKed", func() bool {
		got, problem = clientStatus(t, csds), ""
		for _, typ := range []string{xds.ListenerType, xds.RouteType, xds.ClusterType, xds.EndpointType} {
			acked := typeStatus(t, adminAddr, node, typ).AckedVersion
			n := 0
			for k, st := range got {
				if k.TypeURL != typ {
					continue
				}
				n++
				if st.Status != "ACKED" || st.Version != acked || acked == "" {
					problem += fmt.Sprintf("; %s %s: %+v, /clients ACKed %q", typ, k.Name, st, acked)
				}
			}
			if n != 1 {
				problem += fmt.Sprintf("; %d resources of %s", n, typ)
			}
		}
		return problem == ""
	})
	return got
}
