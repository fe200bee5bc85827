package consul

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

func TestNewConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     map[string]any
		wantKey string
	}{
		{"unknown key", map[string]any{"adress": "x"}, "adress"},
		{"bad warning", map[string]any{"warning": "maybe"}, "warning"},
		{"bad critical", map[string]any{"critical": "ignore"}, "critical"},
		{"bad on_empty", map[string]any{"on_empty": "keep"}, "on_empty"},
		{"bad scheme", map[string]any{"scheme": "ftp"}, "scheme"},
		{"bad glob", map[string]any{"services": map[string]any{"include": []any{"[a"}}}, "services.include[0]"},
		{"bad template", map[string]any{"cluster_name": "{{.Service"}, "cluster_name"},
		{"unknown template field", map[string]any{"cluster_name": "{{.Nope}}"}, "cluster_name"},
		{"wait too long", map[string]any{"wait": "11m"}, "wait"},
		{"wait not a duration", map[string]any{"wait": "soon"}, "wait"},
		{"no room for reads", map[string]any{"max_connections": 3}, "max_connections"},
		{"negative read rate", map[string]any{"max_read_rate": -1}, "max_read_rate"},
		{"priority of an unlisted datacenter", map[string]any{"datacenters": []any{"dc1"}, "datacenter_priority": map[string]any{"dc2": 1}}, "datacenter_priority.dc2"},
		{"read timeout too short", map[string]any{"read_timeout": "10ms"}, "read_timeout"},
		{"cert without key", map[string]any{"tls": map[string]any{"cert_file": "c.pem"}}, "tls.key_file"},
		{"empty datacenter", map[string]any{"datacenters": []any{"dc1", ""}}, "datacenters[1]"},
		{"datacenter twice", map[string]any{"datacenters": []any{"dc1", "dc2", "dc1"}}, "datacenters[2]"},
		{"datacenter not a string", map[string]any{"datacenters": []any{map[string]any{"a": 1}}}, "datacenters[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, sources.Options{Name: "c"})
			var ke *settings.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("err = %v, want a *KeyError", err)
			}
			if ke.Key != tc.wantKey {
				t.Errorf("key = %q, want %q (err %v)", ke.Key, tc.wantKey, err)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "10.0.0.9:8500")
	t.Setenv("CONSUL_HTTP_TOKEN", "secret")
	s, err := New(map[string]any{"datacenters": []any{"dc1", "dc2"}}, sources.Options{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	c := s.cfg
	if c.Address != "10.0.0.9:8500" || c.Token != "secret" || !*c.Stale || c.Wait.Minutes() != 5 ||
		c.MaxConcurrentFetches != 8 || c.MaxConnections != 0 || !*c.Watch || c.WatchesPerConnection != 200 || c.OnEmpty != OnEmptyEmpty ||
		c.priority(1, "dc2") != 1 || c.AddressSource != AddressService || c.Warning != WarningHealthy ||
		c.MaxStale != 10*time.Second || c.ReadTimeout != 5*time.Second {
		t.Errorf("defaults = %+v", c)
	}
}

// TestConnPlan: by default the source takes three quarters of what the
// agent allows one client address, 16 when the agent does not say; a
// max_connections set wins; a share of a budget the agent's sources
// share is what the source plans with; reads, bulk queries and the probe
// have theirs first (one shared connection over HTTP/2), the watches the
// rest.
func TestConnPlan(t *testing.T) {
	tests := []struct {
		name                          string
		cfg                           map[string]any
		http2                         bool
		agentLimit                    int
		share                         share
		budget, reads, lanes, perLane int
	}{
		{"HTTP/1.1, Consul's default limit", nil, false, 200, share{}, 150, 8, 138, 1},
		{"HTTP/2, Consul's default limit", nil, true, 200, share{}, 150, 8, 149, 200},
		{"HTTP/1.1, a lowered limit", nil, false, 40, share{}, 30, 8, 18, 1},
		{"HTTP/1.1, limit unknown", nil, false, 0, share{}, 16, 8, 4, 1},
		{"HTTP/1.1, a tiny limit", nil, false, 6, share{}, 5, 1, 0, 1},
		{"max_connections wins", map[string]any{"max_connections": 20}, false, 200, share{}, 20, 8, 8, 1},
		{"two datacenters", map[string]any{"datacenters": []any{"a", "b"}}, false, 200, share{}, 150, 8, 135, 1},
		{"no watches", map[string]any{"watch": false}, false, 200, share{}, 150, 8, 0, 1},
		{"HTTP/1.1, half of the default budget", nil, false, 200, share{conns: 75, of: 2}, 75, 8, 63, 1},
		{"HTTP/2, half of the default budget", nil, true, 200, share{conns: 75, of: 2}, 75, 8, 74, 200},
		{"HTTP/1.1, the floor of a share", nil, false, 0, share{conns: 5, of: 4}, 5, 1, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg, sources.Options{Name: "c"})
			if err != nil {
				t.Fatal(err)
			}
			p := s.cfg.planShare(tc.http2, tc.agentLimit, tc.share)
			if p.budget != tc.budget || p.reads != tc.reads || p.lanes != tc.lanes || p.perLane != tc.perLane {
				t.Errorf("plan = %+v, want budget %d, reads %d, lanes %d of %d", p, tc.budget, tc.reads, tc.lanes, tc.perLane)
			}
		})
	}
}

// TestPlainHTTPWarning: validate warns, on the key the user wrote, when
// max_connections leaves plain HTTP less room for watches than the
// default; never for the defaults (whether they watch everything depends on
// the catalog, which the running source reports), nor over HTTPS, nor
// without watches.
func TestPlainHTTPWarning(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]any
		want string // "" for no warning
	}{
		{"plain HTTP, defaults", map[string]any{}, ""},
		{"plain HTTP, the default address written", map[string]any{"address": "127.0.0.1:8500"}, ""},
		{"plain HTTP, max_connections", map[string]any{"max_connections": 20}, "20 leaves room for 8 watched services over plain HTTP (138 by default)"},
		{"plain HTTP, max_connections above the default", map[string]any{"max_connections": 190}, ""},
		{"HTTPS, max_connections", map[string]any{"address": "https://127.0.0.1:8501", "max_connections": 20}, ""},
		{"no watches", map[string]any{"watch": false, "max_connections": 20}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg, sources.Options{Name: "c"})
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, p := range s.Check() {
				if p.Warning {
					got = p.Key + ": " + p.Err.Error()
				}
			}
			switch {
			case tc.want == "" && got != "":
				t.Errorf("warning %q, want none", got)
			case tc.want != "" && !strings.Contains(got, "max_connections: "+tc.want):
				t.Errorf("warning %q, want one on max_connections saying %q", got, tc.want)
			}
		})
	}
}

// TestResyncGraceAccepted: a configuration written for the source's own
// grace still loads (the removal guard does its job now), and validate
// warns that the key has no effect.
func TestResyncGraceAccepted(t *testing.T) {
	s, err := New(map[string]any{"resync_grace": "1s"}, sources.Options{Name: "c"})
	if err != nil {
		t.Fatalf("a configuration naming resync_grace: %v", err)
	}
	var warned bool
	for _, p := range s.Check() {
		if p.Key == "resync_grace" {
			warned = p.Warning && strings.Contains(p.Err.Error(), "no effect")
		}
	}
	if !warned {
		t.Errorf("Check() = %v, want a warning that resync_grace has no effect", s.Check())
	}
	plain, _ := New(map[string]any{}, sources.Options{Name: "c"})
	for _, p := range plain.Check() {
		if p.Key == "resync_grace" {
			t.Errorf("Check() warns about resync_grace without it: %v", p)
		}
	}
}

func TestSelected(t *testing.T) {
	c := Config{Services: ServiceSelector{Include: []string{"web*", "api"}, Exclude: []string{"web-old"}}, Tags: []string{"prod"}}
	tests := []struct {
		name string
		tags []string
		want bool
	}{
		{"web", []string{"prod"}, true},
		{"web-old", []string{"prod"}, false},
		{"api", []string{"prod", "x"}, true},
		{"api", []string{"x"}, false},
		{"db", []string{"prod"}, false},
	}
	for _, tc := range tests {
		if got := c.selected(tc.name, tc.tags); got != tc.want {
			t.Errorf("selected(%q, %v) = %v, want %v", tc.name, tc.tags, got, tc.want)
		}
	}
}

// TestDocumentedKeys decodes the configuration example of the package
// documentation: every documented key exists and its default validates.
func TestDocumentedKeys(t *testing.T) {
	const doc = `
address: 127.0.0.1:8500
scheme: http
token_file: /run/secrets/consul
tls: {ca_file: "", ca_path: "", cert_file: "", key_file: "", server_name: "", insecure_skip_verify: false}
datacenters: [dc1]
datacenter_priority: {}
namespace: ""
partition: ""
services: {include: ["*"], exclude: []}
tags: []
node_meta: {}
filter: ""
address_source: service
warning: healthy
keep_mesh: false
critical: unhealthy
locality: {region_key: "", zone_key: "", subzone_key: ""}
cluster_name: "{{.Service}}"
on_empty: empty
stale: true
max_stale: 10s
cached: false
sweep_cached: true
wait: 5m
max_concurrent_fetches: 8
max_read_rate: 0
max_connections: 12
retry_min: 250ms
retry_max: 30s
read_timeout: 5s
`
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(doc), &raw); err != nil {
		t.Fatal(err)
	}
	if _, err := New(raw, sources.Options{Name: "c"}); err != nil {
		t.Fatalf("documented configuration: %v", err)
	}
}

// TestEnvironment checks the consul CLI's variables: each fills its key
// when the entry leaves it out, the entry's keys win, and a bad value is
// an error naming the variable.
func TestEnvironment(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		"CONSUL_HTTP_ADDR":       "10.0.0.9:8501",
		"CONSUL_HTTP_TOKEN_FILE": "token",
		"CONSUL_HTTP_TOKEN":      "secret",
		"CONSUL_HTTP_SSL":        "true",
		"CONSUL_HTTP_SSL_VERIFY": "false",
		"CONSUL_CACERT":          "ca.pem",
		"CONSUL_CAPATH":          "/etc/consul/ca",
		"CONSUL_CLIENT_CERT":     "/etc/consul/client.pem",
		"CONSUL_CLIENT_KEY":      "/etc/consul/client-key.pem",
		"CONSUL_TLS_SERVER_NAME": "consul.example",
		"CONSUL_NAMESPACE":       "team-a",
		"CONSUL_PARTITION":       "part-1",
	}
	tests := []struct {
		name string
		env  map[string]string
		raw  map[string]any
		want func(c Config) string // "" when c is as expected, else what is wrong
	}{
		{"every variable", all, nil, func(c Config) string {
			type envKeys struct {
				Address, Scheme, Token, TokenFile, Namespace, Partition string
				TLS                                                     TLSConfig
			}
			want := envKeys{Address: "10.0.0.9:8501", Scheme: "https", TokenFile: filepath.Join(wd, "token"),
				Namespace: "team-a", Partition: "part-1",
				TLS: TLSConfig{CAFile: filepath.Join(wd, "ca.pem"), CAPath: "/etc/consul/ca", CertFile: "/etc/consul/client.pem",
					KeyFile: "/etc/consul/client-key.pem", ServerName: "consul.example", InsecureSkipVerify: true}}
			got := envKeys{c.Address, c.Scheme, c.Token, c.TokenFile, c.Namespace, c.Partition, c.TLS}
			if got != want {
				return fmt.Sprintf("got %+v, want %+v", got, want)
			}
			return ""
		}},
		{"the token without a token file", map[string]string{"CONSUL_HTTP_TOKEN": "secret"}, nil, func(c Config) string {
			if c.Token != "secret" || c.TokenFile != "" {
				return fmt.Sprintf("token %q, token_file %q", c.Token, c.TokenFile)
			}
			return ""
		}},
		{"the entry's keys win", all, map[string]any{
			"address": "127.0.0.1:8500", "scheme": "http", "token": "mine", "namespace": "ns", "partition": "",
			"tls": map[string]any{"ca_file": "/mine.pem", "insecure_skip_verify": false},
		}, func(c Config) string {
			if c.Address != "127.0.0.1:8500" || c.Scheme != "http" || c.Token != "mine" || c.TokenFile != "" ||
				c.Namespace != "ns" || c.Partition != "" || c.TLS.CAFile != "/mine.pem" || c.TLS.InsecureSkipVerify ||
				c.TLS.ServerName != "consul.example" {
				return fmt.Sprintf("got %+v", c)
			}
			return ""
		}},
		{"ssl off changes nothing", map[string]string{"CONSUL_HTTP_SSL": "0", "CONSUL_HTTP_ADDR": "https://c:8501"}, nil, func(c Config) string {
			if c.Scheme != "https" {
				return "scheme " + c.Scheme
			}
			return ""
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			s, err := New(tc.raw, sources.Options{Name: "c"})
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.want(s.cfg); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestEnvironmentErrors(t *testing.T) {
	tests := []struct {
		name, variable, value, want string
	}{
		{"ssl not a boolean", "CONSUL_HTTP_SSL", "yes", `scheme: "yes" is not true or false`},
		{"verify not a boolean", "CONSUL_HTTP_SSL_VERIFY", "off!", `tls.insecure_skip_verify: "off!" is not true or false`},
		{"address", "CONSUL_HTTP_ADDR", "foo:bar:baz", `address: "foo:bar:baz" is not an address (want host:port or an http://, https:// or unix:// URL): invalid port ":bar:baz" after host`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tc.variable, tc.value)
			_, err := New(nil, sources.Options{Name: "c"})
			var ke *settings.KeyError
			if !errors.As(err, &ke) || err.Error() != tc.want || ke.Origin != "environment variable "+tc.variable {
				t.Fatalf("err = %v (origin %q), want %q from environment variable %s", err, ke.Origin, tc.want, tc.variable)
			}
		})
	}
}

// clearEnv empties the variables the source reads for the rest of the
// test (an empty variable counts as unset), so that the tester's own
// environment does not take part.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, e := range consulEnv {
		t.Setenv(e.name, "")
	}
}
