package config

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	_ "github.com/xdsbridge/xdsbridge/plugins" // the real source types, whose messages are checked here
)

// goInternals are fragments of Go's own error texts that no configuration
// error may show: parser packages, reflect kinds, protojson positions and
// lowerCamelCase proto field names.
var goInternals = []string{"strconv", "reflect", "mapstructure", "interface {}", "expected type", "proto:",
	"(line ", "got \"slice\"", "time: ", "parse \"", "lbPolicy", "[]string"}

// TestErrorMessages checks the whole message of each kind of mistake, as
// `bridge` prints it after "bridge: ": one line, naming the file (or the
// variable or flag the value came from), the key, the value and what is
// allowed.
func TestErrorMessages(t *testing.T) {
	const file = "sources: [{name: static, type: file, path: services.yaml}]\n"
	tests := []struct {
		name   string
		config string
		env    map[string]string
		flags  []string
		want   string
	}{
		{name: "whole number", config: file + "xds: {max_response_bytes: abc}",
			want: `invalid configuration bridge.yaml:2:7: xds.max_response_bytes: "abc" is not a whole number`},
		{name: "whole number out of its type's range", config: "sources: [{name: c, type: consul, datacenters: [a], datacenter_priority: {a: -1}}]",
			want: `invalid configuration bridge.yaml:1:75: sources[0].datacenter_priority.a: -1 is out of range (0 to 4294967295)`},
		{name: "duration with a wrong unit", config: file + "holdoff: {min: 10 seconds}",
			want: `invalid configuration bridge.yaml:2:11: holdoff.min: "10 seconds" is not a duration: durations need a unit such as 100ms or 30s`},
		{name: "duration without a unit", config: file + "holdoff: {min: 100}",
			want: `invalid configuration bridge.yaml:2:11: holdoff.min: 100 is not a duration: durations need a unit such as 100ms or 30s`},
		{name: "duration without a unit from the environment", config: file, env: map[string]string{"BRIDGE_HOLDOFF_MIN": "100"},
			want: `invalid configuration from environment variable BRIDGE_HOLDOFF_MIN: holdoff.min: "100" is not a duration: durations need a unit such as 100ms or 30s`},
		{name: "boolean", config: file + "xds: {grpc: {enabled: yes}}",
			want: `invalid configuration bridge.yaml:2:14: xds.grpc.enabled: "yes" is not true or false`},
		{name: "list for a map", config: "sources: [{name: c, type: consul, services: [web, api]}]",
			want: `invalid configuration bridge.yaml:1:35: sources[0].services: want a map with keys include, exclude, not the list [web, api]`},
		{name: "map for a list", config: "sources: [{name: c, type: consul, datacenters: {dc1: 0}}]",
			want: `invalid configuration bridge.yaml:1:35: sources[0].datacenters: want a list, not the map {dc1: 0}`},
		{name: "unknown enum value of a cluster fragment", config: file + "clusters: [{cluster: {lb_policy: LEAST_REQUESTS}}]",
			want: `invalid configuration bridge.yaml:2:23: clusters[0].cluster.lb_policy: unknown value "LEAST_REQUESTS" ` +
				`(want ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, CLUSTER_PROVIDED, LOAD_BALANCING_POLICY_CONFIG)`},
		{name: "scope default", config: file + "scopes: {default: some}",
			want: `invalid configuration bridge.yaml:2:10: scopes.default: "some" is not allowed (want all or none)`},
		{name: "scope without a name", config: file + "scopes: {rules: [{node: {id: \"pay-*\"}}]}",
			want: `invalid configuration bridge.yaml:2:18: scopes.rules[0].name: is required (it names the scope in /clients and /debug/why)`},
		{name: "scope node glob", config: file + "scopes: {rules: [{name: a, node: {cluster: \"[\"}}]}",
			want: `invalid configuration bridge.yaml:2:35: scopes.rules[0].node.cluster: bad glob "[": syntax error in pattern`},
		{name: "scope unknown key", config: file + "scopes: {rules: [{name: a, nodes: {}}]}",
			want: `invalid configuration bridge.yaml:2:28: scopes.rules[0].nodes: unknown key (did you mean node?)`},
		{name: "URL without a scheme", config: `sources: [{name: cmdb, type: http, url: "127.0.0.1:18555/x"}]`,
			want: `invalid configuration bridge.yaml:1:36: sources[0].url: "127.0.0.1:18555/x" has no scheme (want http:// or https://, such as http://127.0.0.1:18555/x)`},
		{name: "consul address", config: `sources: [{name: c, type: consul, address: "foo:bar:baz"}]`,
			want: `invalid configuration bridge.yaml:1:35: sources[0].address: "foo:bar:baz" is not an address (want host:port or an http://, https:// or unix:// URL): invalid port ":bar:baz" after host`},
		{name: "consul address from the environment", config: "sources: [{name: c, type: consul}]", env: map[string]string{"CONSUL_HTTP_ADDR": "foo:bar:baz"},
			want: `invalid configuration from environment variable CONSUL_HTTP_ADDR: sources[0].address: "foo:bar:baz" is not an address (want host:port or an http://, https:// or unix:// URL): invalid port ":bar:baz" after host`},
		{name: "consul boolean variable", config: "sources: [{name: c, type: consul}]", env: map[string]string{"CONSUL_HTTP_SSL": "yes"},
			want: `invalid configuration from environment variable CONSUL_HTTP_SSL: sources[0].scheme: "yes" is not true or false`},
		{name: "level from the environment", config: file, env: map[string]string{"BRIDGE_LOG_LEVEL": "verbose"},
			want: `invalid configuration from environment variable BRIDGE_LOG_LEVEL: log.level: unknown level "verbose" (want debug, info, warn or error)`},
		{name: "level from a flag", config: file, env: map[string]string{"BRIDGE_LOG_LEVEL": "verbose"}, flags: []string{"--log-level=loud"},
			want: `invalid configuration from flag --log-level: log.level: unknown level "loud" (want debug, info, warn or error)`},
		{name: "level from the file", config: file + "log: {level: verbose}",
			want: `invalid configuration bridge.yaml:2:7: log.level: unknown level "verbose" (want debug, info, warn or error)`},
		{name: "same address for xds and admin", config: file + "xds: {listen: '127.0.0.1:9000'}\nadmin: {listen: '127.0.0.1:9000'}",
			want: `invalid configuration bridge.yaml:3:9: admin.listen: 127.0.0.1:9000 collides with xds.listen (127.0.0.1:9000): each listener needs an address of its own`},
		{name: "wildcard and specific host on one port", config: file + "xds: {listen: '0.0.0.0:9000'}\nadmin: {listen: 'localhost:9000'}",
			want: `invalid configuration bridge.yaml:3:9: admin.listen: localhost:9000 collides with xds.listen (0.0.0.0:9000): a wildcard host takes port 9000 on every address`},
		{name: "REST on the xds address", config: file + "xds: {listen: '[::1]:9000', rest: {enabled: true, listen: '[::1]:9000'}}",
			want: `invalid configuration bridge.yaml:2:51: xds.rest.listen: [::1]:9000 collides with xds.listen ([::1]:9000): each listener needs an address of its own`},
		{name: "collision from the environment", config: file, env: map[string]string{"BRIDGE_ADMIN_LISTEN": "127.0.0.1:18000"},
			want: `invalid configuration from environment variable BRIDGE_ADMIN_LISTEN: admin.listen: 127.0.0.1:18000 collides with xds.listen (127.0.0.1:18000): each listener needs an address of its own`},
		{name: "istio shape", config: file + "istio: {shape: mesh}",
			want: `invalid configuration bridge.yaml:2:9: istio.shape: unknown shape "mesh" (want inline or workload_entries)`},
		{name: "istio shape from the environment", config: file, env: map[string]string{"BRIDGE_ISTIO_SHAPE": "mesh"},
			want: `invalid configuration from environment variable BRIDGE_ISTIO_SHAPE: istio.shape: unknown shape "mesh" (want inline or workload_entries)`},
		{name: "istio empty host", config: file + `istio: {host: ""}`,
			want: `invalid configuration bridge.yaml:2:9: istio.host: "" is not allowed: remove the key for its default, "{service}.service.consul"`},
		{name: "istio rule port", config: file + "istio: {rules: [{match: {services: [web]}}, {port: 70000}]}",
			want: `invalid configuration bridge.yaml:2:46: istio.rules[1].port: 70000 is out of range (0 to 65535)`},
		{name: "istio export_to", config: file + `istio: {export_to: ["*", "."]}`,
			want: `invalid configuration bridge.yaml:2:9: istio.export_to: exportTo [*, .]: "*" (everyone) or "~" (no one) must be its only entry`},
		{name: "not YAML", config: "xds: [",
			want: `invalid configuration bridge.yaml:1: not valid YAML: did not find expected node content`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if err := os.WriteFile("bridge.yaml", []byte(tc.config+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			AddFlags(fs)
			if err := fs.Parse(tc.flags); err != nil {
				t.Fatal(err)
			}
			_, err := Load("bridge.yaml", fs)
			if err == nil {
				t.Fatalf("Load succeeded, want %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error\n got %s\nwant %s", got, tc.want)
			}
			for _, bad := range goInternals {
				if strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q has Go's own text %q or more than one line", err, bad)
				}
			}
		})
	}
}

// TestZeroDurationAllowed: a bare 0 is zero in any unit, allowed where
// zero means "never" (memory.return_after_quiet), refused as not positive
// where it does not.
func TestZeroDurationAllowed(t *testing.T) {
	cfg, err := parse([]byte("memory: {return_after_quiet: 0}\nxds: {keepalive: {max_connection_age: 0}}\n"+minimal), "/d", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Memory.ReturnAfterQuiet != 0 || cfg.XDS.Keepalive.MaxConnectionAge != 0 {
		t.Errorf("return_after_quiet %v, max_connection_age %v; want 0", cfg.Memory.ReturnAfterQuiet, cfg.XDS.Keepalive.MaxConnectionAge)
	}
	_, err = parse([]byte("holdoff: {min: 0}\n"+minimal), "/d", nil)
	if err == nil || err.Error() != "holdoff.min: must be a positive duration, not 0s" {
		t.Errorf("holdoff.min: 0: error %v", err)
	}
}

// TestListenersThatCanShare: different ports, port 0 (each listener gets
// its own) and different specific hosts on one port all pass.
func TestListenersThatCanShare(t *testing.T) {
	for _, listen := range []string{
		"xds: {listen: '127.0.0.1:0'}\nadmin: {listen: '127.0.0.1:0'}",
		"xds: {listen: '127.0.0.1:9000'}\nadmin: {listen: '127.0.0.2:9000'}",
		"xds: {listen: '127.0.0.1:9000', rest: {enabled: false, listen: '127.0.0.1:9000'}}",
		"xds: {listen: '[::1]:9000'}\nadmin: {listen: '127.0.0.1:9000'}",
	} {
		if _, err := parse([]byte(listen+"\n"+minimal), "/d", nil); err != nil {
			t.Errorf("%s: %v", listen, err)
		}
	}
}

// TestUnknownEnvironmentVariable: a misspelled BRIDGE_ variable is a
// warning naming the closest setting; a known one is not.
func TestUnknownEnvironmentVariable(t *testing.T) {
	t.Setenv("BRIDGE_XDS_LISTN", "127.0.0.1:1")
	t.Setenv("BRIDGE_LOG_FORMAT", "json")
	cfg, err := parse([]byte(minimal), "/d", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "environment variable BRIDGE_XDS_LISTN is not a setting and is ignored (did you mean BRIDGE_XDS_LISTEN?)"
	if len(cfg.Warnings) != 1 || cfg.Warnings[0] != want {
		t.Errorf("Warnings = %q, want [%q]", cfg.Warnings, want)
	}
	if cfg.XDS.Listen != "127.0.0.1:18000" {
		t.Errorf("xds.listen = %q, want the default", cfg.XDS.Listen)
	}
	problems := cfg.Check()
	if n := len(problems); n == 0 || problems[n-1].String() != "warning: "+want {
		t.Errorf("Check() = %v, want it to end with the warning", problems)
	}
}

// TestEveryErrorAtOnce: a file with several mistakes reports each of them,
// in the file's order, at its line and column, an unknown key with the
// known key it most likely meant; a source's own mistakes are reported
// beside the rest.
func TestEveryErrorAtOnce(t *testing.T) {
	t.Chdir(t.TempDir())
	const config = `xds:
  listne: 127.0.0.1:18000
holdoff:
  min: 100
log: {level: loud}
sources:
  - name: static
    type: file
    path: services.yaml
    formt: yaml
  - name: c
    type: consul
    adress: 127.0.0.1:8500
`
	if err := os.WriteFile("bridge.yaml", []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load("bridge.yaml", nil)
	want := `invalid configuration bridge.yaml: 4 errors:
  bridge.yaml:2:3: xds.listne: unknown key (did you mean listen?)
  bridge.yaml:4:3: holdoff.min: 100 is not a duration: durations need a unit such as 100ms or 30s
  bridge.yaml:10:5: sources[0].formt: unknown key (did you mean format?)
  bridge.yaml:13:5: sources[1].adress: unknown key (did you mean address?)`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got %v\nwant %s", err, want)
	}
	// Once the file decodes, the checks of values report every mistake
	// too.
	const values = "log: {level: loud, format: xml}\nholdoff: {min: 1s, max: 10ms}\nsources: [{name: static, type: file, path: services.yaml}]\n"
	if err := os.WriteFile("bridge.yaml", []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load("bridge.yaml", nil)
	want = `invalid configuration bridge.yaml: 3 errors:
  bridge.yaml:1:7: log.level: unknown level "loud" (want debug, info, warn or error)
  bridge.yaml:1:20: log.format: unknown format "xml" (want text or json)
  bridge.yaml:2:20: holdoff.max: 10ms is shorter than holdoff.min (1s)`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got %v\nwant %s", err, want)
	}
}

// TestYAMLSyntaxErrorLine: a YAML mistake is reported at the line where it
// is, not where the list or map around it began, and a tab says so.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct{ config, want string }{
		{"sources:\n  - name: a\n    type: file\n   path: x\n",
			"invalid configuration bridge.yaml:4: not valid YAML: did not find expected '-' indicator"},
		{"log:\n  level: info\nxds:\n\tlisten: x\n",
			"invalid configuration bridge.yaml:4: not valid YAML: found character that cannot start any token (a tab: YAML indents with spaces only)"},
		{"xds:\n  listen: 127.0.0.1:18000\nadmin:\n  listen: x\n    pprof: true\n",
			"invalid configuration bridge.yaml:5: not valid YAML: mapping values are not allowed in this context"},
	} {
		if err := os.WriteFile("bridge.yaml", []byte(tc.config), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load("bridge.yaml", nil); err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.config, err, tc.want)
		}
	}
}
