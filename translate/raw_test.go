package translate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRawBootstrap(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "raw", "bootstrap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRaw("bootstrap.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Listeners) != 1 || r.Listeners[0].GetName() != "listener_0" || len(r.Clusters) != 1 ||
		r.Clusters[0].GetName() != "service_envoyproxy_io" || len(r.Routes) != 0 || len(r.Secrets) != 0 {
		t.Fatalf("parsed %d listeners, %d routes, %d clusters, %d secrets", len(r.Listeners), len(r.Routes), len(r.Clusters), len(r.Secrets))
	}
}

func TestParseRawForms(t *testing.T) {
	doc := `
routes:
- name: edge
  virtualHosts: [{name: any, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: web}}]}]
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: web
  type: STATIC
  load_assignment: {cluster_name: web}
- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: ca
  validation_context: {trusted_ca: {filename: /etc/ssl/ca.pem}}
`
	r, err := ParseRaw("f.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Routes) != 1 || len(r.Clusters) != 1 || len(r.Secrets) != 1 {
		t.Fatalf("parsed %d routes, %d clusters, %d secrets", len(r.Routes), len(r.Clusters), len(r.Secrets))
	}
	json := `{"clusters": [{"name": "a", "type": "STATIC", "connectTimeout": "2s"}]}`
	if r, err := ParseRaw("f.json", []byte(json)); err != nil || r.Clusters[0].GetConnectTimeout().AsDuration().Seconds() != 2 {
		t.Fatalf("JSON: %v", err)
	}
	if r, err := ParseRaw("empty.yaml", nil); err != nil || len(r.Clusters) != 0 {
		t.Fatalf("empty file: %v", err)
	}
}

func TestParseRawErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		key, err  string
	}{
		{"syntax", "listeners: [\n  {name: a\n", 0, "", "parsing"},
		{"not a map", "- a\n", 1, "", "map of lists"},
		{"unknown top key", "listeners: []\nlistners: []\n", 2, "listners", "unknown key"},
		{"beside static_resources", "static_resources: {}\nclusters: []\n", 1, "", "alone"},
		{"not a list", "clusters: {name: a}\n", 1, "clusters", "must be a list"},
		{"unknown field", "clusters:\n- name: a\n  type: STATIC\n  conect_timeout: 1s\n", 4, "clusters[0].conect_timeout", "unknown field"},
		{"camelCase path", "static_resources:\n  clusters:\n  - name: a\n    connectTimeout: soon\n", 4, "static_resources.clusters[0].connect_timeout", "duration"},
		{"deep", "listeners:\n- name: l\n  address: {socket_address: {address: 1.2.3.4, port_value: 80}}\n  filter_chains:\n  - filters:\n    - name: x\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy\n        stat_prefix: s\n        clustr: c\n", 10, "listeners[0].filter_chains[0].filters[0].typed_config.clustr", "unknown field"},
		{"invalid", "clusters:\n- name: a\n  connect_timeout: -1s\n", 3, "clusters[0].connect_timeout", "invalid"},
		{"no name", "clusters:\n- type: STATIC\n", 2, "clusters[0].name", "required"},
		{"duplicate", "clusters:\n- name: a\n- name: a\n", 3, "clusters[1].name", "also the name"},
		{"unserved type", "resources:\n- \"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\n  cluster_name: a\n", 2, "resources[0].@type", "not served"},
		{"unknown type", "resources:\n- \"@type\": type.googleapis.com/x.Y\n", 2, "resources[0].@type", "unknown type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRaw("f.yaml", []byte(tc.doc))
			var re *RawError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RawError", err)
			}
			if re.File != "f.yaml" || re.Line != tc.line || re.Key != tc.key || !strings.Contains(re.Err.Error(), tc.err) {
				t.Fatalf("err = %v (line %d, key %q), want line %d key %q and %q", err, re.Line, re.Key, tc.line, tc.key, tc.err)
			}
		})
	}
}

// TestParseRawSensitive checks that a private key written wrong is not
// quoted in the error.
func TestParseRawSensitive(t *testing.T) {
	doc := "secrets:\n- name: s\n  tls_certificate:\n    private_key: \"-----BEGIN PRIVATE KEY-----SECRETBYTES\"\n"
	_, err := ParseRaw("f.yaml", []byte(doc))
	if err == nil || strings.Contains(err.Error(), "SECRETBYTES") || !strings.Contains(err.Error(), "sensitive") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "f.yaml:4: secrets[0].tls_certificate.private_key") {
		t.Fatalf("err = %v, want file, line and key", err)
	}
}
