package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

const envoyScopes = `
scopes:
  rules:
    - name: edge
      node: {cluster: edge}
`

func TestEnvoySections(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "edge")
	pair := ca.Issue(dir, "edge", "edge.example.com")
	raw := filepath.Join(dir, "static.yaml")
	if err := os.WriteFile(raw, []byte("clusters:\n- name: local\n  type: STATIC\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := minimal + envoyScopes + `
routes:
  - config: edge
    hosts: ["{service}.example.com"]
    route: {route: {timeout: 3s}, request_headers_to_add: [{header: {key: X-Edge, value: "1"}}]}
  - config: internal
    tag_prefix: ""
    metadata_key: route
listeners:
  - name: edge_https
    port: 8443
    http:
      route_config: edge
      connection_manager: {use_remote_address: true}
    tls: {certificates: [edge_cert], validation: edge_ca}
    scopes: [edge]
  - name: db
    address: 127.0.0.1
    port: 5432
    tcp: {cluster: postgres}
secrets:
  - name: edge_cert
    certificate_file: ` + pair.CertFile + `
    private_key_file: ` + pair.KeyFile + `
    grant: [edge]
  - name: edge_ca
    ca_file: ` + ca.CertFile + `
resources:
  - file: static.yaml
    scopes: [edge]
`
	cfg, err := parse([]byte(doc), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.RouteRules.Configs(); strings.Join(got, ",") != "edge,internal" {
		t.Errorf("route configurations = %v", got)
	}
	if r := cfg.RouteRules.Rules[0]; r.TagPrefix != "urlprefix-" || cfg.RouteRules.Rules[1].TagPrefix != "" {
		t.Errorf("tag prefixes = %q, %q; want the default, then none", r.TagPrefix, cfg.RouteRules.Rules[1].TagPrefix)
	}
	if len(cfg.ListenerSet) != 2 || cfg.ListenerSet[0].Resource.GetName() != "edge_https" ||
		strings.Join(cfg.ListenerSet[0].Secrets, ",") != "edge_cert,edge_ca" || cfg.ListenerSet[0].RouteConfig != "edge" {
		t.Errorf("listeners = %+v", cfg.ListenerSet)
	}
	if len(cfg.SecretFiles) != 2 || cfg.ResourceFiles[0].File != raw {
		t.Errorf("secrets %+v, resources %+v", cfg.SecretFiles, cfg.ResourceFiles)
	}
	if !strings.Contains(strings.Join(cfg.Warnings, "\n"), "xds.identity") {
		t.Errorf("no warning about granting keys without xds.identity: %v", cfg.Warnings)
	}
	for _, p := range cfg.Check() {
		if !p.Warning {
			t.Errorf("Check: %v", p)
		}
	}
}

func TestEnvoySectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc, key, err string
	}{
		{"route fragment", "routes: [{config: e, route: {route: {timout: 1s}}}]", "routes[0].route.route.timout", "unknown field"},
		{"route unknown key", "routes: [{config: e, host: [x]}]", "routes[0].host", "unknown"},
		{"listener neither", "listeners: [{name: l, port: 80}]", "listeners[0].http", "needs http"},
		{"listener both", "listeners: [{name: l, port: 80, http: {route_config: r}, tcp: {cluster: c}}]", "listeners[0].tcp", "not both"},
		{"listener hcm fragment", "listeners: [{name: l, port: 80, http: {route_config: r, connection_manager: {rds: {}}}}]", "listeners[0].http.connection_manager.rds", "set by the bridge"},
		{"listener tcp cluster", "listeners: [{name: l, port: 80, tcp: {}}]", "listeners[0].tcp.cluster", "required"},
		{"listener duplicate", "listeners: [{name: l, port: 80, tcp: {cluster: c}}, {name: l, port: 81, tcp: {cluster: c}}]", "listeners[1].name", "also the name"},
		{"listener scope", "listeners: [{name: l, port: 80, tcp: {cluster: c}, scopes: [nope]}]", "listeners[0].scopes[0]", "no scope"},
		{"secret kind", "secrets: [{name: s, certificate_file: a, private_key_file: b, ca_file: c}]", "secrets[0].ca_file", "not both"},
		{"secret half", "secrets: [{name: s, certificate_file: a}]", "secrets[0].private_key_file", "both"},
		{"secret grant", "secrets: [{name: s, certificate_file: a, private_key_file: b}]", "secrets[0].grant", "required for a private key"},
		{"secret grant scope", "secrets: [{name: s, certificate_file: a, private_key_file: b, grant: [x]}]", "secrets[0].grant[0]", "no scope"},
		{"secret duplicate", "secrets: [{name: s, ca_file: a}, {name: s, ca_file: b}]", "secrets[1].name", "also the name"},
		{"resource file", "resources: [{scopes: [edge]}]", "resources[0].file", "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse([]byte(minimal+envoyScopes+tc.doc), t.TempDir(), nil)
			found := false
			for _, e := range settings.Split(err) {
				var ke *settings.KeyError
				if errors.As(e, &ke) && ke.Key == tc.key && strings.Contains(ke.Err.Error(), tc.err) {
					found = true
				}
			}
			if !found {
				t.Fatalf("err = %v, want key %s and %q", err, tc.key, tc.err)
			}
		})
	}
}

// TestEnvoyCheck checks what `bridge validate` reads: a key that is not
// the certificate's, a bad resource file, a listener naming a secret
// nothing defines.
func TestEnvoyCheck(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "edge")
	a, b := ca.Issue(dir, "a"), ca.Issue(dir, "b")
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("clusters:\n- name: x\n  tipe: STATIC\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := minimal + envoyScopes + `
listeners: [{name: l, port: 80, http: {route_config: nowhere}, tls: {certificates: [missing]}}]
secrets: [{name: s, certificate_file: ` + a.CertFile + `, private_key_file: ` + b.KeyFile + `, grant: [edge]}]
resources: [{file: bad.yaml}]
`
	cfg, err := parse([]byte(doc), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range cfg.Check() {
		got = append(got, p.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"secrets[0].certificate_file: ", "does not match",
		"resources[0].file: ", "bad.yaml:3: clusters[0].tipe: unknown field",
		`listeners[0].tls: no secret "missing"`, `listeners[0].http.route_config: no route configuration "nowhere"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("Check does not say %q:\n%s", want, all)
		}
	}
}
