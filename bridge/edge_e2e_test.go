package bridge_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

const edgeConfig = `
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
holdoff: {min: 10ms, max: 50ms}
sources:
  - {name: static, type: file, path: services.yaml}
scopes:
  rules:
    - name: edge
      node: {cluster: edge}
routes:
  - config: edge
    hosts: ["{service}.example.com"]
listeners:
  - name: edge_https
    port: 8443
    http: {route_config: edge}
    tls: {certificates: [edge_cert]}
    scopes: [edge]
secrets:
  - name: edge_cert
    certificate_file: edge.pem
    private_key_file: edge-key.pem
    grant: [edge]
`

const edgeServices = `services:
  - name: web
    endpoints: [{address: 10.0.0.1, port: 80}]
  - name: api
    endpoints: [{address: 10.0.0.2, port: 80, metadata: {tags: "urlprefix-/api strip=/api,v2"}}]
`

// keyTraces are forms in which a private key's bytes could leak: a line
// of its PEM body, and a stretch of the PEM's base64 (as JSON renders
// bytes).
func keyTraces(t *testing.T, keyFile string) [][]byte {
	t.Helper()
	pemBytes, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(pemBytes), []byte("\n"))
	b64 := base64.StdEncoding.EncodeToString(pemBytes)
	return [][]byte{lines[1], []byte(b64[40:100])}
}

// TestEdgeEnvoy: an Envoy whose bootstrap holds only the bridge gets its
// listener, route configuration, secret, clusters and endpoints on every
// variant and routes requests by host and path; a certificate replaced in
// place reaches every granted node; a node without the grant never gets
// it; and the private key's bytes are in no log line, dump, debug page or
// metric.
func TestEdgeEnvoy(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "edge")
	ca.Issue(dir, "edge", "edge.example.com")
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(edgeServices), 0o600); err != nil {
		t.Fatal(err)
	}
	traces := keyTraces(t, filepath.Join(dir, "edge-key.pem"))
	var logs bridgetest.LogBuffer
	in := bridgetest.StartIn(t, dir, edgeConfig, &logs)
	adminAddr := in.AdminAddr().String()
	admin := "http://" + adminAddr
	bridgetest.WaitReady(t, adminAddr, bridgetest.Patience)
	ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Patience)
	defer cancel()

	variants := []struct {
		name           string
		delta, perType bool
	}{{"sotw-ads", false, false}, {"delta-ads", true, false}, {"sotw-pertype", false, true}, {"delta-pertype", true, true}}
	var edges []*envoysim.Client
	for _, v := range variants {
		c, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String(), Node: "edge-" + v.name, Cluster: "edge",
			Delta: v.delta, PerType: v.perType, Listeners: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		edges = append(edges, c)
	}
	plain, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String(), Node: "plain-1", Cluster: "plain",
		Delta: true, Listeners: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	for i, c := range edges {
		for _, req := range []struct{ host, path, want string }{
			{"web.example.com", "/anything", "web"},
			{"api.example.com", "/", "api"},
			{"other.example.com", "/api/v1", "api"}, // the tag's route, on any host
		} {
			if err := c.WaitFor(ctx, func(envoysim.State) bool {
				r := c.Request("edge_https", req.host, req.path)
				return r.Status == 200 && r.Cluster == req.want
			}); err != nil {
				t.Fatalf("%s: %s%s never reached %s: %+v", variants[i].name, req.host, req.path, req.want, c.Request("edge_https", req.host, req.path))
			}
		}
		if tr := c.Traffic(); tr.Misses != 0 || tr.OutOfOrder != 0 {
			t.Errorf("%s: %d misses (%s), %d out of order (%s)", variants[i].name, tr.Misses, tr.LastMiss, tr.OutOfOrder, tr.LastOutOfOrder)
		}
	}

	// Rotation: the certificate and key replaced in place reach every
	// granted node.
	old := edges[0].State().Hashes[envoysim.SecretType]["edge_cert"]
	ca.Issue(dir, "edge", "edge.example.com")
	traces = append(traces, keyTraces(t, filepath.Join(dir, "edge-key.pem"))...)
	for i, c := range edges {
		if err := c.WaitFor(ctx, func(s envoysim.State) bool {
			h, ok := s.Hashes[envoysim.SecretType]["edge_cert"]
			return ok && h != old
		}); err != nil {
			t.Fatalf("%s: the replaced certificate never arrived: %v", variants[i].name, err)
		}
	}
	// The node without the grant asked for the secret (its listener names
	// it), was refused, and never got it: its listener never warms.
	bridgetest.Eventually(t, bridgetest.Patience, "the refusal to be counted", func() bool {
		_, body := bridgetest.Get(admin + "/metrics")
		return strings.Contains(body, "xdsbridge_secrets_denied_total 1") || strings.Contains(body, "xdsbridge_secrets_denied_total 2")
	})
	if s := plain.State(); len(s.Hashes[envoysim.SecretType]) != 0 {
		t.Fatalf("a node without the grant holds secrets: %v", s.Hashes[envoysim.SecretType])
	}
	if r := plain.Request("edge_https", "web.example.com", "/"); r.Status != 0 {
		t.Fatalf("the ungranted node's listener is active: %+v", r)
	}
	if n := strings.Count(logs.String(), "refusing a secret"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once", n)
	}

	// Nothing the bridge writes or shows holds the key.
	pages := map[string]string{"log": logs.String()}
	for _, path := range []string{"/debug/config_dump", "/debug/config_dump?node=edge-sotw-ads", "/debug/config_dump?node=edge-delta-pertype",
		"/debug/why?route=web.example.com/x", "/debug/why?cluster=web", "/clients", "/metrics", "/sources", "/"} {
		code, body := bridgetest.Get(admin + path)
		if code != 200 {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
		pages[path] = body
	}
	if !strings.Contains(pages["/debug/config_dump?node=edge-sotw-ads"], "[redacted]") {
		t.Errorf("the node's config dump shows no redacted secret:\n%s", pages["/debug/config_dump?node=edge-sotw-ads"])
	}
	cfg, err := config.Load(filepath.Join(dir, "bridge.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := bridge.Snapshot(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d, err := bridge.ForNode(rs, bridge.Client("edge-1", "edge", false), cfg.ScopeRules)
	if err != nil {
		t.Fatal(err)
	}
	cd, err := bridge.ConfigDump(d, bridge.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := bridge.Render(cd, true)
	if err != nil {
		t.Fatal(err)
	}
	pages["bridge dump"] = string(out)
	if !strings.Contains(pages["bridge dump"], "[redacted]") {
		t.Errorf("bridge dump shows no redacted secret")
	}
	for where, text := range pages {
		for _, tr := range traces {
			if bytes.Contains([]byte(text), tr) {
				t.Errorf("%s holds the private key's bytes", where)
			}
		}
	}
}
