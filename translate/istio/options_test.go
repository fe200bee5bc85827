package istio

import (
	"errors"
	"testing"

	keys "github.com/xdsbridge/xdsbridge/settings" // named keys: this package has a type settings
	"github.com/xdsbridge/xdsbridge/sources"
)

func TestNewNamesTheKey(t *testing.T) {
	match := sources.Selector{Services: []string{"web"}}
	for _, tc := range []struct {
		name string
		opts Options
		key  string // the *settings.KeyError's key; empty: valid
	}{
		{name: "defaults"},
		{name: "every field", opts: Options{Shape: ShapeInline, Host: "{service}.{source}.example.org.", ProtocolKey: "proto",
			DefaultProtocol: "grpc", Location: "mesh_external", Namespace: "consul", ExportTo: []string{"."},
			Rules: []Rule{{Match: match, Namespace: "a", ExportTo: []string{"*"}, Location: "MESH_INTERNAL", Port: 80}}}},
		{name: "shape", opts: Options{Shape: "sidecar"}, key: "shape"},
		{name: "host without service", opts: Options{Host: "web.service.consul"}, key: "host"},
		{name: "host placeholder", opts: Options{Host: "{service}.{datacenter}.consul"}, key: "host"},
		{name: "host syntax", opts: Options{Host: "{service}_x.consul"}, key: "host"},
		{name: "host wildcard", opts: Options{Host: "*.{service}.consul"}, key: "host"},
		{name: "default protocol", opts: Options{DefaultProtocol: "udp"}, key: "default_protocol"},
		{name: "location", opts: Options{Location: "EXTERNAL"}, key: "location"},
		{name: "namespace", opts: Options{Namespace: "Consul"}, key: "namespace"},
		{name: "export to", opts: Options{ExportTo: []string{"*", "."}}, key: "export_to"},
		{name: "export to the namespace twice", opts: Options{Namespace: "consul", ExportTo: []string{".", "consul"}}, key: "export_to"},
		{name: "rule match", opts: Options{Rules: []Rule{{}, {Match: sources.Selector{Services: []string{"[a"}}}}}, key: "rules[1].match.services[0]"},
		{name: "rule namespace", opts: Options{Rules: []Rule{{Namespace: "a.b"}}}, key: "rules[0].namespace"},
		{name: "rule export to", opts: Options{Rules: []Rule{{ExportTo: []string{"~", "*"}}}}, key: "rules[0].export_to"},
		{name: "rule export to against the namespace", opts: Options{Namespace: "consul", Rules: []Rule{{ExportTo: []string{"consul", "."}}}},
			key: "rules[0].export_to"},
		{name: "rule location", opts: Options{Rules: []Rule{{Location: "inside"}}}, key: "rules[0].location"},
		{name: "external workload entries", opts: Options{Shape: ShapeWorkloadEntries, Location: "MESH_EXTERNAL"}, key: "location"},
		{name: "rule external workload entries", opts: Options{Shape: ShapeWorkloadEntries, Rules: []Rule{{}, {Location: "MESH_EXTERNAL"}}},
			key: "rules[1].location"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if tc.key == "" {
				if err != nil {
					t.Fatalf("valid options refused: %v", err)
				}
				return
			}
			var ke *keys.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error %v is not a *settings.KeyError", err)
			}
			if ke.Key != tc.key {
				t.Fatalf("error %q names %q, want %q", err, ke.Key, tc.key)
			}
		})
	}
}
