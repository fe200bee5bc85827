package dns

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

func TestConfigErrors(t *testing.T) {
	svc := []any{map[string]any{"cluster": "api", "srv": "_api._tcp.example.org"}}
	cases := []struct {
		name string
		cfg  map[string]any
		key  string
	}{
		{"unknown key", map[string]any{"services": svc, "serverz": []string{"1.2.3.4"}}, "serverz"},
		{"server not an IP", map[string]any{"services": svc, "servers": []string{"dns.example.org:53"}}, "servers[0]"},
		{"bad server port", map[string]any{"services": svc, "servers": []string{"127.0.0.1:0"}}, "servers[0]"},
		{"bad duration", map[string]any{"services": svc, "timeout": "soon"}, "timeout"},
		{"zero timeout", map[string]any{"services": svc, "timeout": "0s"}, "timeout"},
		{"bad transport", map[string]any{"services": svc, "transport": "quic"}, "transport"},
		{"small edns buffer", map[string]any{"services": svc, "edns_buffer_size": 100}, "edns_buffer_size"},
		{"no attempts", map[string]any{"services": svc, "attempts": 0}, "attempts"},
		{"bad family", map[string]any{"services": svc, "family": "ipx"}, "family"},
		{"max below min", map[string]any{"services": svc, "refresh": map[string]any{"min": "10s", "max": "1s"}}, "refresh.max"},
		{"jitter out of range", map[string]any{"services": svc, "refresh": map[string]any{"jitter": 1.5}}, "refresh.jitter"},
		{"unknown refresh key", map[string]any{"services": svc, "refresh": map[string]any{"fixed": "1s"}}, "refresh.fixed"},
		{"no services", map[string]any{}, "services"},
		{"missing cluster", map[string]any{"services": []any{map[string]any{"srv": "_a._tcp.example.org"}}}, "services[0].cluster"},
		{"srv and host", map[string]any{"services": []any{map[string]any{"cluster": "a", "srv": "_a._tcp.x", "host": "x"}}}, "services[0].host"},
		{"neither srv nor host", map[string]any{"services": []any{map[string]any{"cluster": "a"}}}, "services[0].srv"},
		{"host without port", map[string]any{"services": []any{map[string]any{"cluster": "a", "host": "web.example.org"}}}, "services[0].port"},
		{"port on srv", map[string]any{"services": []any{map[string]any{"cluster": "a", "srv": "_a._tcp.x", "port": 80}}}, "services[0].port"},
		{"bad name", map[string]any{"services": []any{map[string]any{"cluster": "a", "host": "a..b", "port": 80}}}, "services[0].host"},
		{"duplicate cluster", map[string]any{"services": []any{
			map[string]any{"cluster": "a", "srv": "_a._tcp.x"}, map[string]any{"cluster": "a", "srv": "_b._tcp.x"}}}, "services[1].cluster"},
		{"template without services", map[string]any{"templates": []any{map[string]any{"cluster": "{{.Service}}", "srv": "_{{.Service}}._tcp"}}}, "templates[0].services"},
		{"template parse error", map[string]any{"templates": []any{map[string]any{"cluster": "{{.Service", "srv": "x", "services": []string{"a"}}}}, "templates[0].cluster"},
		{"template unknown field", map[string]any{"templates": []any{map[string]any{"cluster": "{{.Nope}}", "srv": "x", "services": []string{"a"}}}}, "templates[0].cluster"},
		{"template clashes with a service", map[string]any{"services": svc, "templates": []any{
			map[string]any{"cluster": "{{.Service}}", "srv": "_{{.Service}}._tcp.{{.Domain}}", "services": []string{"api"}, "domain": "x"}}},
			"templates[0].services[0].cluster"},
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

func TestConfigTemplates(t *testing.T) {
	src, err := New(map[string]any{
		"servers": []string{"127.0.0.1", "::1", "[::2]"},
		"services": []any{
			map[string]any{"cluster": "web", "host": "web.example.org", "port": "8080"},
		},
		"templates": []any{
			map[string]any{"srv": "_{{.Service}}._tcp.{{.Domain}}", "cluster": "{{.Service}}", "services": []string{"a", "b"}, "domain": "example.org"},
		},
	}, sources.Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*Source)
	want := []entry{
		{cluster: "web", kind: KindHost, name: "web.example.org", port: 8080},
		{cluster: "a", kind: KindSRV, name: "_a._tcp.example.org"},
		{cluster: "b", kind: KindSRV, name: "_b._tcp.example.org"},
	}
	if !slices.Equal(s.entries, want) {
		t.Errorf("entries %+v, want %+v", s.entries, want)
	}
	if want := []string{"127.0.0.1:53", "[::1]:53", "[::2]:53"}; !slices.Equal(s.servers, want) {
		t.Errorf("servers %v, want %v", s.servers, want)
	}
}

func TestRegistered(t *testing.T) {
	if _, ok := sources.Lookup("dns"); !ok {
		t.Fatal("type dns not registered")
	}
}

func TestSystemResolverConfig(t *testing.T) {
	path := t.TempDir() + "/resolv.conf"
	if err := os.WriteFile(path, []byte("nameserver 127.0.0.53\nnameserver ::1\nsearch example.org\noptions ndots:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := New(map[string]any{
		"resolv_conf": path,
		"services":    []any{map[string]any{"cluster": "a", "srv": "_a._tcp"}},
	}, sources.Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.(*Source).resolver()
	if err != nil {
		t.Fatal(err)
	}
	servers, names := r.current()
	if want := []string{"127.0.0.53:53", "[::1]:53"}; !slices.Equal(servers, want) {
		t.Errorf("servers %v, want %v", servers, want)
	}
	if got, want := names("_a._tcp"), []string{"_a._tcp.example.org.", "_a._tcp."}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
}

func TestSystemResolverConfigMissing(t *testing.T) {
	src, err := New(map[string]any{
		"resolv_conf": t.TempDir() + "/missing",
		"services":    []any{map[string]any{"cluster": "a", "srv": "_a._tcp.example.org"}},
	}, sources.Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Run(t.Context(), make(chan sources.Update)); err == nil {
		t.Fatal("Run with an unreadable resolv.conf succeeded")
	}
}
