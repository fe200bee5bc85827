package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runBridge runs the command line args and returns the exit code, stdout
// and stderr.
func runBridge(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// writeConfig writes a config with one file source (and its services file)
// followed by extra, and returns the config's path.
func writeConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	services := "services:\n  - name: greeter\n    endpoints: [{address: 10.0.0.1, port: 50051, metadata: {tags: 'grpc,v1'}}]\n" +
		"  - name: web\n    endpoints: [{address: 10.0.0.2, port: 8080}]\n"
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(services), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bridge.yaml")
	cfg := "sources: [{name: static, type: file, path: services.yaml}]\n" + extra
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestValidateShapingErrors: every mistake in the clusters and transforms
// sections is reported by `bridge validate` with its key path, exit 2.
func TestValidateShapingErrors(t *testing.T) {
	tests := []struct{ name, config, want string }{
		{"clusters not a list", "clusters: {a: 1}", "clusters: want a list, not the map {a: 1}"},
		{"rule not a map", "clusters: [{cluster: {lb_policy: RANDOM}}, web]", `clusters[1]: want a map, not "web"`},
		{"transforms not a list", "transforms: exclude", `transforms: want a list, not "exclude"`},
		{"rule unknown key", "clusters: [{matches: {}, cluster: {lb_policy: RANDOM}}]", "clusters[0].matches: unknown key"},
		{"rule without cluster", "clusters: [{match: {services: [web]}}]", "clusters[0].cluster: is required"},
		{"bad clients", "clusters: [{clients: proxies, cluster: {lb_policy: RANDOM}}]", `clusters[0].clients: unknown client class "proxies"`},
		{"bad glob", "clusters: [{match: {services: ['[']}, cluster: {lb_policy: RANDOM}}]", `clusters[0].match.services[0]: bad glob "["`},
		{"match unknown key", "clusters: [{match: {service: [web]}, cluster: {lb_policy: RANDOM}}]", "clusters[0].match.service: unknown key"},
		{"fragment typo", "clusters:\n  - {cluster: {lb_policy: RANDOM}}\n  - {cluster: {outlier_detection: {consecutive_5xxx: 1}}}",
			"clusters[1].cluster.outlier_detection.consecutive_5xxx: unknown field"},
		{"fragment bad value", "clusters: [{cluster: {lb_policy: FASTEST}}]", `clusters[0].cluster.lb_policy: unknown value "FASTEST" (want ROUND_ROBIN, LEAST_REQUEST`},
		{"fragment bridge-owned", "clusters: [{cluster: {eds_cluster_config: {service_name: x}}}]", "clusters[0].cluster.eds_cluster_config: is set by the bridge"},
		{"fragment invalid", "clusters: [{cluster: {common_lb_config: {healthy_panic_threshold: {value: 101}}}}]",
			"clusters[0].cluster.common_lb_config.healthy_panic_threshold.value: the shaped cluster is invalid: value must be inside range [0, 100]"},
		{"fragment unknown Any", `clusters: [{cluster: {transport_socket: {name: x, typed_config: {"@type": type.googleapis.com/x.Y}}}}]`,
			"clusters[0].cluster.transport_socket.typed_config.@type: unknown type"},
		{"transform without type", "transforms: [{services: [web]}]", "transforms[0].type: is required"},
		{"transform unknown type", "transforms: [{type: upcase}]", `transforms[0].type: unknown transform type "upcase"`},
		{"transform name not a string", "transforms: [{name: [a], type: include}]", "transforms[0].name: want a string, not the list [a]"},
		{"transform unknown key", "transforms: [{type: include}, {type: rename, template: x, servces: [a]}]", "transforms[1].servces: unknown key"},
		{"transform bad template", "transforms: [{type: rename, template: '{{.Nam}}'}]", "transforms[0].template: unknown field .Nam (want .Name, .Source, .Meta or .Locality)"},
		{"transform bad setting", "transforms: [{type: override, weight: 0}]", "transforms[0].weight: 0 is outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runBridge("validate", "--config", writeConfig(t, tt.config+"\n"))
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, output %q%q; want exit 2 with %q", code, out, errOut, tt.want)
			}
		})
	}
}

func TestDump(t *testing.T) {
	path := writeConfig(t, `
transforms:
  - {type: rename, services: [web], template: "{{.Name}}-v2"}
clusters:
  - match: {tags: [grpc]}
    clients: envoy
    cluster: {lb_policy: LEAST_REQUEST}
`)
	const (
		clusters  = "'@type': type.googleapis.com/envoy.admin.v3.ClustersConfigDump\n    dynamic_active_clusters:\n"
		listeners = "'@type': type.googleapis.com/envoy.admin.v3.ListenersConfigDump\n    dynamic_listeners:\n"
		endpoints = "'@type': type.googleapis.com/envoy.admin.v3.EndpointsConfigDump\n    dynamic_endpoint_configs:\n"
	)
	tests := []struct {
		name string
		args []string
		want []string // in stdout, in this order
		not  []string
		note string // on stderr
	}{
		{"envoy clusters", []string{"--type", "cds", "--format", "json"},
			[]string{`"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump"`, `"dynamic_active_clusters": [`, `"version_info": "`,
				`"name": "greeter"`, `"lb_policy": "LEAST_REQUEST"`, `"name": "web-v2"`, `"connect_timeout": "5s"`},
			[]string{"lbPolicy", "connectTimeout", "EndpointsConfigDump", "Bootstrap"}, ""},
		{"grpc clusters", []string{"--type", "CDS", "--grpc", "--node-id", "n1", "--format", "JSON"},
			[]string{`"name": "greeter"`}, []string{"LEAST_REQUEST"}, ""},
		{"a node", []string{"--node-id", "n1", "--node-cluster", "edge"},
			[]string{"BootstrapConfigDump\n    bootstrap:\n      node:\n        id: n1\n        cluster: edge\n        user_agent_name: envoy\n", clusters, endpoints}, nil, ""},
		{"envoy gets no gRPC listeners", []string{"--type", "lds"}, []string{"ListenersConfigDump"}, []string{"dynamic_listeners"},
			"note: no listeners: the configuration has none for Envoys (listeners, routes, resources); the proxyless gRPC chain goes to gRPC clients only (add --grpc)"},
		{"grpc listeners yaml", []string{"--type", "lds", "--grpc"},
			[]string{listeners + "      - name: greeter\n        active_state:\n          version_info: "}, nil, ""},
		{"type list", []string{"--type", "eds,cds", "--type", "EDS"}, []string{clusters, endpoints}, []string{"Listeners", "Bootstrap"}, ""},
		{"everything", nil, []string{"BootstrapConfigDump", clusters, endpoints, "address: 10.0.0.2"}, []string{"Listeners"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runBridge(append([]string{"dump", path}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
			if strings.Contains(strings.ToLower(strings.Join(tt.args, " ")), "json") && !json.Valid([]byte(out)) {
				t.Errorf("output is not JSON:\n%s", out)
			}
			// Quiet by default: the sources' INFO lines are not printed.
			if strings.Contains(errOut, "level=INFO") || !strings.Contains(errOut, tt.note) || (tt.note == "" && errOut != "") {
				t.Errorf("stderr %q; want only %q", errOut, tt.note)
			}
		})
	}
}

func TestDumpErrors(t *testing.T) {
	good := writeConfig(t, "")
	// An http source asking a server that accepts and never answers
	// neither reports nor fails before the deadline.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	stuck := filepath.Join(t.TempDir(), "stuck.yaml")
	if err := os.WriteFile(stuck, []byte("sources: [{name: cmdb, type: http, url: 'http://"+lis.Addr().String()+"/', timeout: 10m}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if err := os.WriteFile(missing, []byte("sources: [{name: static, type: file, path: nowhere.yaml}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad type", []string{"dump", "-c", good, "--type", "xds"}, 2, `--type: unknown type "xds"`},
		{"bad type in a list", []string{"dump", good, "--type", "cds,x"}, 2, `--type: unknown type "x" (want cds, eds, lds, rds, sds, serviceentry or workloadentry)`},
		{"config takes Envoy's types only", []string{"config", "n1", "--type", "serviceentry"}, 2, `--type: unknown type "serviceentry" (want cds, eds, lds, rds or sds)`},
		{"bad format", []string{"dump", "-c", good, "--format", "toml"}, 2, `--format: unknown format "toml"`},
		{"bad config", []string{"dump", "-c", writeConfig(t, "clusters: [{cluster: {name: x}}]")}, 2, "clusters[0].cluster.name"},
		{"no listen flags", []string{"dump", good, "--xds-listen", ":1"}, 2, "unknown flag: --xds-listen"},
		{"sources never sync", []string{"dump", "-c", stuck, "--timeout", "300ms"}, 1, "sources did not report before the deadline: cmdb"},
		// The timeout is far longer than any test: only failing at the
		// first failed read ends this one.
		{"a source fails", []string{"dump", missing, "--timeout", "1h"}, 1, "reading the sources: source static: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runBridge(tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, errOut, tt.code, tt.want)
			}
		})
	}
}

// TestDumpScopedOut: a node whose scope leaves out every service is told
// so, not that the sources reported nothing.
func TestDumpScopedOut(t *testing.T) {
	path := writeConfig(t, "scopes: {default: none}\n")
	code, out, errOut := runBridge("dump", path, "--type", "cds", "--node-id", "web-1")
	want := `bridge: note: no clusters for this node: its scope "default" leaves out all 2 the bridge has (see scopes in the configuration)`
	if code != 0 || strings.Contains(out, "dynamic_active_clusters") || strings.TrimSpace(errOut) != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0, no clusters and %q", code, out, errOut, want)
	}
}
