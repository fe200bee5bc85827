package main

import (
	"bytes"
	"context"
	"encoding/json"
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
		{"clusters not a list", "clusters: {a: 1}", "clusters: must be a list"},
		{"rule not a map", "clusters: [{cluster: {lb_policy: RANDOM}}, web]", "clusters[1]: expected type"},
		{"transforms not a list", "transforms: exclude", "transforms[0]: expected type"},
		{"rule unknown key", "clusters: [{matches: {}, cluster: {lb_policy: RANDOM}}]", "clusters[0].matches: unknown key"},
		{"rule without cluster", "clusters: [{match: {services: [web]}}]", "clusters[0].cluster: is required"},
		{"bad clients", "clusters: [{clients: proxies, cluster: {lb_policy: RANDOM}}]", `clusters[0].clients: unknown client class "proxies"`},
		{"bad glob", "clusters: [{match: {services: ['[']}, cluster: {lb_policy: RANDOM}}]", `clusters[0].match.services[0]: bad glob "["`},
		{"match unknown key", "clusters: [{match: {service: [web]}, cluster: {lb_policy: RANDOM}}]", "clusters[0].match.service: unknown key"},
		{"fragment typo", "clusters:\n  - {cluster: {lb_policy: RANDOM}}\n  - {cluster: {outlier_detection: {consecutive_5xxx: 1}}}",
			"clusters[1].cluster.outlier_detection.consecutive_5xxx: unknown field"},
		{"fragment bad value", "clusters: [{cluster: {lb_policy: FASTEST}}]", "clusters[0].cluster: "},
		{"fragment bridge-owned", "clusters: [{cluster: {eds_cluster_config: {service_name: x}}}]", "clusters[0].cluster.eds_cluster_config: is set by the bridge"},
		{"fragment invalid", "clusters: [{cluster: {common_lb_config: {healthy_panic_threshold: {value: 101}}}}]", "clusters[0].cluster: the shaped cluster is invalid"},
		{"fragment unknown Any", `clusters: [{cluster: {transport_socket: {name: x, typed_config: {"@type": type.googleapis.com/x.Y}}}}]`,
			"clusters[0].cluster.transport_socket.typed_config.@type: unknown type"},
		{"transform without type", "transforms: [{services: [web]}]", "transforms[0].type: is required"},
		{"transform unknown type", "transforms: [{type: upcase}]", `transforms[0].type: unknown transform type "upcase"`},
		{"transform name not a string", "transforms: [{name: [a], type: include}]", "transforms[0].name: must be a string"},
		{"transform unknown key", "transforms: [{type: include}, {type: rename, template: x, servces: [a]}]", "transforms[1].servces: unknown key"},
		{"transform bad template", "transforms: [{type: rename, template: '{{.Nam}}'}]", "transforms[0].template: "},
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
	tests := []struct {
		name string
		args []string
		want []string // in stdout, in this order
		not  []string
	}{
		{"envoy clusters", []string{"--type", "cds", "--format", "json"},
			[]string{`"client": "envoy"`, `"name": "greeter"`, `"lbPolicy": "LEAST_REQUEST"`, `"name": "web-v2"`}, []string{"endpoints", "listeners"}},
		{"grpc clusters", []string{"--type", "cds", "--grpc", "--node-id", "n1", "--format", "json"},
			[]string{`"node": "n1"`, `"client": "grpc"`, `"name": "greeter"`}, []string{"LEAST_REQUEST"}},
		{"envoy gets no gRPC listeners", []string{"--type", "lds"}, []string{"client: envoy"}, []string{"listeners"}},
		{"grpc listeners yaml", []string{"--type", "lds", "--grpc"}, []string{"client: grpc\nlisteners:\n  - '@type': type.googleapis.com/envoy.config.listener.v3.Listener\n    name: greeter"}, nil},
		{"everything", nil, []string{"clusters:", "endpoints:", "address: 10.0.0.2"}, []string{"listeners:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runBridge(append([]string{"dump", "--config", path}, tt.args...)...)
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
			if strings.Contains(strings.Join(tt.args, " "), "json") && !json.Valid([]byte(out)) {
				t.Errorf("output is not JSON:\n%s", out)
			}
		})
	}
}

func TestDumpErrors(t *testing.T) {
	good := writeConfig(t, "")
	stuck := filepath.Join(t.TempDir(), "stuck.yaml")
	// A DNS source asking a server that does not answer never syncs.
	if err := os.WriteFile(stuck, []byte("sources: [{name: dns, type: dns, servers: ['127.0.0.1:1'], services: [{cluster: a, srv: _a._tcp.example.org}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad type", []string{"dump", "-c", good, "--type", "xds"}, 2, `--type: unknown type "xds"`},
		{"bad format", []string{"dump", "-c", good, "--format", "toml"}, 2, `--format: unknown format "toml"`},
		{"bad config", []string{"dump", "-c", writeConfig(t, "clusters: [{cluster: {name: x}}]")}, 2, "clusters[0].cluster.name"},
		{"sources never sync", []string{"dump", "-c", stuck, "--timeout", "300ms"}, 1, "sources did not report before the deadline: dns"},
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
