package translate

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/test/golden"
)

func TestListenersGolden(t *testing.T) {
	specs := []ListenerSpec{
		{Name: "edge_http", Port: 8080, RouteConfig: "edge"},
		{Name: "edge_https", Address: "::", Port: 8443, RouteConfig: "edge",
			TLS: &TLSSpec{Certificates: []string{"edge_cert"}, Validation: "edge_ca", RequireClientCertificate: true},
			ConnectionManager: map[string]any{
				"use_remote_address": true,
				"http_filters": []any{map[string]any{"name": "envoy.filters.http.cors",
					"typed_config": map[string]any{"@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}}},
			},
			Listener:    map[string]any{"per_connection_buffer_limit_bytes": 32768},
			FilterChain: map[string]any{"filter_chain_match": map[string]any{"server_names": []any{"example.com"}}},
		},
		{Name: "db", Address: "127.0.0.1", Port: 5432, Cluster: "postgres", StatPrefix: "db_tcp"},
	}
	var out bytes.Buffer
	for _, s := range specs {
		l, err := NewListener(s)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		out.Write(protoJSON(t, l))
		out.WriteByte('\n')
	}
	golden.Check(t, filepath.Join("testdata", "listeners.golden"), indentLines(t, out.Bytes()))
}

func TestNewListenerErrors(t *testing.T) {
	base := func(f func(*ListenerSpec)) ListenerSpec {
		s := ListenerSpec{Name: "l", Port: 80, RouteConfig: "r"}
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name     string
		spec     ListenerSpec
		key, err string
	}{
		{"no name", base(func(s *ListenerSpec) { s.Name = "" }), "name", "required"},
		{"bad address", base(func(s *ListenerSpec) { s.Address = "localhost" }), "address", "not an IP"},
		{"no port", base(func(s *ListenerSpec) { s.Port = 0 }), "port", "outside"},
		{"both", base(func(s *ListenerSpec) { s.Cluster = "c" }), "route_config", "exactly one"},
		{"neither", base(func(s *ListenerSpec) { s.RouteConfig = "" }), "route_config", "exactly one"},
		{"owned listener field", base(func(s *ListenerSpec) { s.Listener = map[string]any{"name": "x"} }), "listener.name", "set by the bridge"},
		{"owned chain field", base(func(s *ListenerSpec) { s.FilterChain = map[string]any{"filters": []any{}} }), "filter_chain.filters", "set by the bridge"},
		{"tls socket owned", base(func(s *ListenerSpec) {
			s.TLS = &TLSSpec{Certificates: []string{"c"}}
			s.FilterChain = map[string]any{"transport_socket": map[string]any{"name": "x"}}
		}), "filter_chain.transport_socket", "set by the bridge"},
		{"rds owned", base(func(s *ListenerSpec) { s.ConnectionManager = map[string]any{"route_config": map[string]any{}} }), "connection_manager.route_config", "RDS"},
		{"router given", base(func(s *ListenerSpec) {
			s.ConnectionManager = map[string]any{"http_filters": []any{map[string]any{"name": RouterFilter}}}
		}), "connection_manager.http_filters[0]", "added last"},
		{"no certificates", base(func(s *ListenerSpec) { s.TLS = &TLSSpec{} }), "tls.certificates", "at least one"},
		{"client cert without CA", base(func(s *ListenerSpec) {
			s.TLS = &TLSSpec{Certificates: []string{"c"}, RequireClientCertificate: true}
		}), "tls.require_client_certificate", "validation"},
		{"unknown type", base(func(s *ListenerSpec) {
			s.Listener = map[string]any{"listener_filters": []any{map[string]any{"name": "x", "typed_config": map[string]any{"@type": "type.googleapis.com/nope"}}}}
		}), "listener.listener_filters[0].typed_config.@type", "unknown type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewListener(tc.spec)
			var ke *settings.KeyError
			if err == nil || !asKeyError(err, &ke) || ke.Key != tc.key || !strings.Contains(ke.Err.Error(), tc.err) {
				t.Fatalf("err = %v, want key %s and %q", err, tc.key, tc.err)
			}
		})
	}
}
