package config

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate/istio"
)

func TestIstioDefaults(t *testing.T) {
	cfg, err := parse([]byte(minimal), "/etc/bridge", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Istio
	want := Istio{Shape: "inline", Host: "{service}.service.consul", ProtocolKey: "protocol", DefaultProtocol: "TCP",
		Location: "MESH_INTERNAL", Namespace: "xdsbridge"}
	if got.Enabled || got.Shape != want.Shape || got.Host != want.Host || got.ProtocolKey != want.ProtocolKey ||
		got.DefaultProtocol != want.DefaultProtocol || got.Location != want.Location || got.Namespace != want.Namespace ||
		len(got.ExportTo) != 0 || len(got.Rules) != 0 {
		t.Fatalf("istio defaults %+v, want %+v", got, want)
	}
	if got.Translator == nil {
		t.Fatal("no translator built")
	}
}

// TestIstioRulesKeepCase checks that a rule's metadata keys keep their
// case, which viper alone would lower.
func TestIstioRulesKeepCase(t *testing.T) {
	cfg, err := parse([]byte(minimal+`
istio:
  enabled: true
  shape: workload_entries
  export_to: ["*"]
  rules:
    - match: {metadata: {Team: Money}}
      namespace: payments
      port: 443
`), "/etc/bridge", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Istio.Enabled || !slices.Equal(cfg.Istio.ExportTo, []string{"*"}) {
		t.Fatalf("istio section %+v", cfg.Istio)
	}
	res, err := cfg.Istio.Translator.Service(sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 8443, Health: sources.HealthHealthy, Metadata: map[string]string{"Team": "Money"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resources) != 2 || res.Resources[0].Name != "payments/web" || res.Resources[1].Kind != istio.WorkloadEntry {
		t.Fatalf("the rule did not apply: %+v", res.Resources)
	}
}

func TestIstioEnvironment(t *testing.T) {
	t.Setenv("BRIDGE_ISTIO_SHAPE", "workload_entries")
	t.Setenv("BRIDGE_ISTIO_EXPORT_TO", ".,shop")
	cfg, err := parse([]byte(minimal), "/etc/bridge", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Istio.Shape != "workload_entries" || !slices.Equal(cfg.Istio.ExportTo, []string{".", "shop"}) {
		t.Fatalf("environment not applied: %+v", cfg.Istio)
	}
}

func TestIstioErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ name, section, key string }{
		{"unknown key", "istio: {colour: blue}", "istio.colour"},
		{"shape", "istio: {shape: mesh}", "istio.shape"},
		{"empty host", `istio: {host: ""}`, "istio.host"},
		{"host", "istio: {host: consul.example.org}", "istio.host"},
		{"default protocol", "istio: {default_protocol: quic}", "istio.default_protocol"},
		{"default port 0", "istio: {default_port: 0}", "istio.default_port"},
		{"default port too large", "istio: {default_port: 70000}", "istio.default_port"},
		{"location", "istio: {location: inside}", "istio.location"},
		{"namespace", "istio: {namespace: Consul_NS}", "istio.namespace"},
		{"export to", `istio: {export_to: ["*", "."]}`, "istio.export_to"},
		{"rules not a list", "istio: {rules: {a: b}}", "istio.rules"},
		{"rule not a map", "istio: {rules: [web]}", "istio.rules[0]"},
		{"rule unknown key", "istio: {rules: [{match: {}}, {namespace: a, hosts: [b]}]}", "istio.rules[1].hosts"},
		{"rule glob", `istio: {rules: [{match: {services: ["[a"]}}]}`, "istio.rules[0].match.services[0]"},
		{"rule namespace", "istio: {rules: [{namespace: a.b}]}", "istio.rules[0].namespace"},
		{"rule port", "istio: {rules: [{port: 70000}]}", "istio.rules[0].port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse([]byte(minimal+tc.section+"\n"), "/etc/bridge", nil)
			var ke *settings.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error %v is not a *settings.KeyError", err)
			}
			if ke.Key != tc.key {
				t.Fatalf("error %q names %q, want %q", err, ke.Key, tc.key)
			}
		})
	}
}

// TestIstioDocumented parses the istio section as docs/configuration.md
// and docs/istio.md show it: every key they name exists, and every value
// they show is accepted.
func TestIstioDocumented(t *testing.T) {
	for _, doc := range []string{"../docs/configuration.md", "../docs/istio.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		section := istioBlock(string(data))
		if section == "" {
			t.Fatalf("%s shows no istio: section in a yaml block", doc)
		}
		cfg, err := parse([]byte(minimal+section), "/etc/bridge", nil)
		if err != nil {
			t.Fatalf("%s: the istio section it shows is refused: %v", doc, err)
		}
		if cfg.Istio.Enabled {
			t.Errorf("%s shows enabled: true; the default is false", doc)
		}
	}
}

// istioBlock returns the lines of a Markdown document's first yaml code
// block from the line "istio:" to the end of that section (the next line
// that is not indented) or of the block.
func istioBlock(doc string) string {
	var out []string
	in := false
	for line := range strings.SplitSeq(doc, "\n") {
		switch {
		case !in && line == "istio:" || !in && strings.HasPrefix(line, "istio: "):
			in = true
		case in && (strings.HasPrefix(line, "```") || line != "" && line[0] != ' '):
			return strings.Join(out, "\n") + "\n"
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
