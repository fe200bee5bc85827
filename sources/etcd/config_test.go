package etcd

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

func TestConfigErrors(t *testing.T) {
	svc := []any{map[string]any{"prefix": "services/", "format": FormatGRPCNaming}}
	entry := func(kv ...any) []any {
		m := map[string]any{"prefix": "services/", "format": FormatGRPCNaming}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return []any{m}
	}
	tlsBlock := map[string]any{"ca_file": "ca.pem"}
	cases := []struct {
		name string
		cfg  map[string]any
		key  string
	}{
		{"unknown key", map[string]any{"services": svc, "endpoint": "x"}, "endpoint"},
		{"unknown tls key", map[string]any{"services": svc, "tls": map[string]any{"insecure": true}}, "tls.insecure"},
		{"endpoint without port", map[string]any{"services": svc, "endpoints": []any{"etcd.example.org"}}, "endpoints[0]"},
		{"endpoint bad scheme", map[string]any{"services": svc, "endpoints": []any{"unix://x:1"}}, "endpoints[0]"},
		{"endpoint with path", map[string]any{"services": svc, "endpoints": []any{"http://x:2379/v3"}}, "endpoints[0]"},
		{"endpoint with credentials", map[string]any{"services": svc, "endpoints": []any{"http://u:p@x:2379"}}, "endpoints[0]"},
		{"tls on http", map[string]any{"services": svc, "tls": tlsBlock, "endpoints": []any{"http://x:2379"}}, "tls"},
		{"cert without key", map[string]any{"services": svc, "tls": map[string]any{"cert_file": "c.pem"}}, "tls.key_file"},
		{"user without password", map[string]any{"services": svc, "auth": map[string]any{"user": "u"}}, "auth.password_file"},
		{"password without user", map[string]any{"services": svc, "auth": map[string]any{"password_file": "p"}}, "auth.user"},
		{"inline password", map[string]any{"services": svc, "auth": map[string]any{"user": "u", "password": "p"}}, "auth.password"},
		{"bare number duration", map[string]any{"services": svc, "dial_timeout": 5}, "dial_timeout"},
		{"zero request timeout", map[string]any{"services": svc, "request_timeout": "0s"}, "request_timeout"},
		{"keepalive too often", map[string]any{"services": svc, "keepalive_time": "1s"}, "keepalive_time"},
		{"retry max below min", map[string]any{"services": svc, "retry_min": "2s", "retry_max": "1s"}, "retry_max"},
		{"no services", map[string]any{}, "services"},
		{"no format", map[string]any{"services": []any{map[string]any{"prefix": "x/"}}}, "services[0].format"},
		{"unknown format", map[string]any{"services": entry("format", "consul")}, "services[0].format"},
		{"no prefix", map[string]any{"services": entry("prefix", "")}, "services[0].prefix"},
		{"whole key space", map[string]any{"services": entry("prefix", "/")}, "services[0].prefix"},
		{"skydns relative prefix", map[string]any{"services": entry("format", FormatSkyDNS, "prefix", "skydns/local")}, "services[0].prefix"},
		{"unknown entry key", map[string]any{"services": entry("path", "/x")}, "services[0].path"},
		{"cluster with spaces", map[string]any{"services": entry("cluster", " web")}, "services[0].cluster"},
		{"overlapping prefixes", map[string]any{"services": []any{
			map[string]any{"prefix": "services/", "format": FormatGRPCNaming},
			map[string]any{"prefix": "services/web", "format": FormatJSON}}}, "services[1].prefix"},
		{"duplicate cluster", map[string]any{"services": []any{
			map[string]any{"prefix": "a/", "format": FormatJSON, "cluster": "web"},
			map[string]any{"prefix": "b/", "format": FormatJSON, "cluster": "web"}}}, "services[1].cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, sources.Options{Name: "t"})
			var ke *settings.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error %v, want a *settings.KeyError", err)
			}
			if ke.Key != tc.key {
				t.Fatalf("key %q (%v), want %q", ke.Key, err, tc.key)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	s, err := New(map[string]any{"services": []any{
		map[string]any{"prefix": "services", "format": FormatGRPCNaming},
		map[string]any{"prefix": "/skydns/local/example", "format": FormatSkyDNS},
	}}, sources.Options{Name: "t", BaseDir: "/etc/bridge"})
	if err != nil {
		t.Fatal(err)
	}
	c := s.(*Source).cfg
	want := defaults()
	want.Endpoints = []string{"http://" + DefaultEndpoint}
	want.Services = []Entry{{Prefix: "services/", Format: FormatGRPCNaming}, {Prefix: "/skydns/local/example/", Format: FormatSkyDNS}}
	if !slices.Equal(c.Endpoints, want.Endpoints) || !slices.Equal(c.Services, want.Services) ||
		c.DialTimeout != 5*time.Second || c.RequestTimeout != 10*time.Second || c.RetryMin != 250*time.Millisecond || c.RetryMax != 30*time.Second {
		t.Errorf("config %+v, want %+v", c, want)
	}

	s, err = New(map[string]any{
		"endpoints": []any{"10.0.0.1:2379", "https://10.0.0.2:2379"},
		"tls":       map[string]any{"ca_file": "ca.pem", "cert_file": "c.pem", "key_file": "k.pem"},
		"auth":      map[string]any{"user": "bridge", "password_file": "pw"},
		"services":  []any{map[string]any{"prefix": "x/", "format": FormatJSON}},
	}, sources.Options{Name: "t", BaseDir: "/etc/bridge"})
	if err != nil {
		t.Fatal(err)
	}
	c = s.(*Source).cfg
	if want := []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}; !slices.Equal(c.Endpoints, want) {
		t.Errorf("endpoints %q, want %q (https with a tls block)", c.Endpoints, want)
	}
	if c.TLS.CAFile != "/etc/bridge/ca.pem" || c.Auth.PasswordFile != "/etc/bridge/pw" {
		t.Errorf("files %q %q, want them relative to the configuration's directory", c.TLS.CAFile, c.Auth.PasswordFile)
	}
	if probs := s.(sources.Checker).Check(); len(probs) != 4 {
		t.Errorf("Check found %v, want the 4 missing files", probs)
	}
}
