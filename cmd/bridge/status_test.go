package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
	"github.com/xdsbridge/xdsbridge/xds"
)

// services is a services file with n services of one endpoint each.
func services(n int) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: svc-%03d, endpoints: [{address: 10.0.%d.%d, port: 8080}]}\n", i, i/200, i%200+1)
	}
	return b.String()
}

// TestStatusAndConfig runs a bridge with admin TLS and a token serving
// three Envoys, one of which NACKs every EDS response, and reads it with
// `bridge status`, `bridge status NODE`, `bridge config NODE` and
// `bridge healthcheck`.
func TestStatusAndConfig(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "admin")
	ca.Issue(dir, "admin", "127.0.0.1")
	for name, content := range map[string]string{"services.yaml": services(120), "token": "s3cret\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	in := bridgetest.StartIn(t, dir, `
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0, token_file: token, tls: {cert_file: admin.pem, key_file: admin-key.pem}}
sources: [{name: static, type: file, path: services.yaml}]
`, io.Discard)
	adminFlags := []string{"--admin", in.AdminAddr().String(), "--ca-file", ca.CertFile, "--token-file", filepath.Join(dir, "token")}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bridgetest.Eventually(t, bridgetest.Patience, "healthcheck to pass", func() bool {
		code, _, _ := runBridge(append([]string{"healthcheck"}, adminFlags...)...)
		return code == 0
	})

	// envoy-z sorts last by name; NACKing, it must come first.
	for _, opts := range []envoysim.Options{
		{Node: "envoy-a", Cluster: "edge"},
		{Node: "envoy-b", Cluster: "edge", Delta: true},
		{Node: "envoy-z", Cluster: "edge", Reject: func(typeURL string, _ []*anypb.Any) error {
			if typeURL == xds.EndpointType {
				return errors.New("endpoint weight out of range")
			}
			return nil
		}},
	} {
		opts.Addr = in.XDSAddr().String()
		c, err := envoysim.Start(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if err := c.WaitFor(ctx, func(s envoysim.State) bool {
			return len(s.Clusters) == 120 && (opts.Reject != nil || len(s.Assignments) == 120)
		}); err != nil {
			t.Fatal(err)
		}
	}
	bridgetest.Eventually(t, bridgetest.Patience, "every client to be synced or NACKing", func() bool {
		code, out, _ := runBridge(append([]string{"status", "--format", "json"}, adminFlags...)...)
		return code == 0 && strings.Count(out, `"acked_version": "`) >= 5 && strings.Contains(out, "endpoint weight out of range")
	})

	code, out, errOut := runBridge(append([]string{"status"}, adminFlags...)...)
	t.Logf("bridge status:\n%s", out)
	table, legend, _ := strings.Cut(out, "\n\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if code != 0 || len(lines) != 4 || !strings.Contains(legend, "SYNCED N: every response sent on the stream is ACKed") {
		t.Fatalf("status: exit %d, %q %q; want a header and three clients", code, out, errOut)
	}
	for i, want := range []string{"envoy-z", "envoy-a", "envoy-b"} {
		if !strings.HasPrefix(lines[i+1], want+" ") {
			t.Errorf("status line %d = %q; want %s (NACKing first, then by name)\n%s", i+1, lines[i+1], want, out)
		}
	}
	if !strings.Contains(lines[1], "NACKED") || !strings.Contains(lines[1], "EDS") || !strings.Contains(lines[1], "endpoint weight out of range") ||
		!strings.Contains(lines[2], "SYNCED") {
		t.Errorf("status:\n%s\nwant envoy-z's EDS NACKED with its error and envoy-a SYNCED", out)
	}

	code, out, _ = runBridge(append([]string{"status", "envoy-z"}, adminFlags...)...)
	t.Logf("bridge status envoy-z:\n%s", out)
	for _, want := range []string{"node        envoy-z", "cluster     edge", "EDS         NACKED", "subscribed 120: svc-000 svc-001",
		"svc-099 ... (20 more)", "last NACK of version 1", "endpoint weight out of range"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status envoy-z: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}

	code, out, _ = runBridge(append([]string{"config", "envoy-a"}, adminFlags...)...)
	if code != 0 || strings.Count(out, "\nCDS ") != 120 || strings.Count(out, "\nEDS ") != 120 || !strings.Contains(out, " svc-119 ") {
		t.Errorf("config envoy-a: exit %d, want 120 clusters and 120 assignments:\n%.500s", code, out)
	}
	code, out, _ = runBridge(append([]string{"config", "envoy-a", "--type", "cds", "--format", "json"}, adminFlags...)...)
	var cd adminv3.ConfigDump
	if code != 0 || protojson.Unmarshal([]byte(out), &cd) != nil {
		t.Fatalf("config envoy-a --format json: exit %d, not a ConfigDump:\n%.500s", code, out)
	}
	d, _, err := bridge.Unpack(&cd)
	if err != nil || len(d[xds.ClusterType]) != 120 || len(d) != 1 || !strings.Contains(out, `"dynamic_active_clusters"`) {
		t.Errorf("config envoy-a --type cds: %d types, %d clusters (%v); want the 120 clusters alone", len(d), len(d[xds.ClusterType]), err)
	}

	// The token and the CA are needed; a node that is not there is an error.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--admin", in.AdminAddr().String(), "--ca-file", ca.CertFile}, "GET /clients: 401 unauthorized"},
		{[]string{"status", "--admin", "https://" + in.AdminAddr().String(), "--token-file", filepath.Join(dir, "token")}, "certificate"},
		{append([]string{"config", "nobody"}, adminFlags...), "404 no xDS stream of node nobody is connected"},
		{append([]string{"status", "nobody"}, adminFlags...), `no xDS stream of node "nobody" is connected`},
	} {
		if code, _, errOut := runBridge(c.args...); code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want exit 1 with %q", c.args, code, errOut, c.want)
		}
	}
}

// TestHealthcheck checks the exit codes of `bridge healthcheck` for a
// bridge that is not ready and for one that is not there.
func TestHealthcheck(t *testing.T) {
	in := bridgetest.Start(t, `
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
sources: [{name: static, type: file, path: missing.yaml}]
`)
	code, _, errOut := runBridge("healthcheck", "--admin", "http://"+in.AdminAddr().String())
	if code != 1 || !strings.Contains(errOut, "not ready (503): not ready: waiting for the first sync of sources: static") {
		t.Errorf("healthcheck of a bridge waiting for its source: exit %d, %q", code, errOut)
	}
	// Nobody connected: said in words, not an empty table.
	if code, out, errOut := runBridge("status", "--admin", in.AdminAddr().String()); code != 0 || out != "no xDS client is connected\n" {
		t.Errorf("status of a bridge without clients: exit %d, %q %q", code, out, errOut)
	}
	// The xDS port given for the admin API is named as such, not shown as
	// HTTP/2's bytes.
	code, _, errOut = runBridge("status", "--admin", in.XDSAddr().String())
	if code != 1 || !strings.Contains(errOut, "is this the xDS port (xds.listen)?") || strings.Contains(errOut, `\x00`) {
		t.Errorf("status --admin the xDS address: exit %d, %q", code, errOut)
	}
	code, _, errOut = runBridge("healthcheck", "--admin", freeport.Addr(t))
	if code != 1 || !strings.Contains(errOut, "connection refused") {
		t.Errorf("healthcheck of nothing: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runBridge("healthcheck", "--admin", "ftp://x"); code != 2 || !strings.Contains(errOut, "--admin:") {
		t.Errorf("healthcheck --admin ftp://x: exit %d, %q; want a usage error", code, errOut)
	}
}

// TestWorstFirst checks the order of `bridge status`: NACKing clients
// first, then the most behind, then by node id.
func TestWorstFirst(t *testing.T) {
	ts := func(sent, acked string, pending int, nack string) xds.TypeStatus {
		t := xds.TypeStatus{LastVersion: sent, AckedVersion: acked, Pending: pending}
		if nack != "" {
			t.NACK = &xds.NACKStatus{Version: nack}
		}
		return t
	}
	clients := []xds.ClientStatus{
		{ID: "a-synced", Types: []xds.TypeStatus{ts("3", "3", 0, "")}},
		{ID: "b-behind-1", Types: []xds.TypeStatus{ts("3", "2", 0, "")}},
		{ID: "c-old-nack", Types: []xds.TypeStatus{ts("4", "4", 0, "2")}},
		{ID: "d-behind-5", Types: []xds.TypeStatus{ts("3", "1", 3, "")}},
		{ID: "e-nacking", Types: []xds.TypeStatus{ts("1", "1", 0, ""), ts("2", "", 0, "2")}},
	}
	worstFirst(clients)
	var got []string
	for _, c := range clients {
		got = append(got, c.ID)
	}
	if want := "e-nacking d-behind-5 b-behind-1 a-synced c-old-nack"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}
