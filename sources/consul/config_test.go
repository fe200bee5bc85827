package consul

import (
	"errors"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

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
		{"negative grace", map[string]any{"resync_grace": "-1s"}, "resync_grace"},
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
			var ke *sources.KeyError
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
	if *c.ResyncGrace != 5*time.Second {
		t.Errorf("resync_grace default = %v", *c.ResyncGrace)
	}
	off, err := New(map[string]any{"resync_grace": "0s"}, sources.Options{Name: "c"})
	if err != nil || *off.cfg.ResyncGrace != 0 {
		t.Errorf("resync_grace 0s: %v, %v", err, off)
	}
	if c.Address != "10.0.0.9:8500" || c.Token != "secret" || !*c.Stale || c.Wait.Minutes() != 5 ||
		c.MaxConcurrentFetches != 8 || c.MaxConnections != 16 || !*c.Watch || c.WatchesPerConnection != 200 || c.OnEmpty != OnEmptyEmpty ||
		c.priority(1, "dc2") != 1 || c.AddressSource != AddressService || c.Warning != WarningHealthy ||
		c.MaxStale != 10*time.Second || c.ReadTimeout != 5*time.Second {
		t.Errorf("defaults = %+v", c)
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
tls: {ca_file: "", cert_file: "", key_file: "", server_name: "", insecure_skip_verify: false}
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
resync_grace: 5s
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
