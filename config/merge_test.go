package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/settings"
)

const twoSources = `
sources:
  - {name: legacy-dns, type: fake, path: a}
  - {name: consul, type: fake, path: b}
`

// TestMergeSection checks that the merge section decodes from YAML and that
// every mistake in it is reported with its full key path.
func TestMergeSection(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		wantKey string // "" for a valid configuration
		wantMsg string
	}{
		{"default only", "merge: {default: union}", "", ""},
		{"weighted rule", `merge:
  services:
    - service: Web.v2
      mode: weighted
      weights: [{source: legacy-dns, weight: 90}, {source: consul, weight: 10}]`, "", ""},
		{"unknown key", "merge: {defualt: union}", "merge.defualt", "unknown key"},
		{"unknown rule key", "merge: {services: [{service: web, mode: union, weight: 3}]}", "merge.services[0].weight", "unknown key"},
		{"unknown weight key", "merge: {services: [{service: web, mode: weighted, weights: [{source: consul, weigth: 3}]}]}",
			"merge.services[0].weights[0].weigth", "unknown key"},
		{"services as a mapping", "merge: {services: {web: {mode: union}}}", "merge.services", "want a list of {service, mode, weights} entries"},
		{"bad default", "merge: {default: last}", "merge.default", `unknown mode "last"`},
		{"weighted default", "merge: {default: weighted}", "merge.default", "needs weights"},
		{"missing service", "merge: {services: [{mode: union}]}", "merge.services[0].service", "is required"},
		{"duplicate service", "merge: {services: [{service: web, mode: union}, {service: web, mode: first}]}",
			"merge.services[1].service", "duplicate service"},
		{"missing mode", "merge: {services: [{service: web}]}", "merge.services[0].mode", "is required"},
		{"bad mode", "merge: {services: [{service: web, mode: split}]}", "merge.services[0].mode", "unknown mode"},
		{"weights without weighted", "merge: {services: [{service: web, mode: first, weights: [{source: consul, weight: 1}]}]}",
			"merge.services[0].weights", "only mode weighted"},
		{"weighted without weights", "merge: {services: [{service: web, mode: weighted}]}", "merge.services[0].weights", "at least one"},
		{"unknown source", "merge: {services: [{service: web, mode: weighted, weights: [{source: consull, weight: 1}]}]}",
			"merge.services[0].weights[0].source", `unknown source "consull" (configured: legacy-dns, consul)`},
		{"duplicate source", "merge: {services: [{service: web, mode: weighted, weights: [{source: consul, weight: 1}, {source: consul, weight: 2}]}]}",
			"merge.services[0].weights[1].source", "duplicate source"},
		{"missing weight", "merge: {services: [{service: web, mode: weighted, weights: [{source: consul}]}]}",
			"merge.services[0].weights[0].weight", "is required"},
		{"weight not a number", "merge: {services: [{service: web, mode: weighted, weights: [{source: consul, weight: lots}]}]}",
			"merge.services[0].weights[0].weight", ""},
		{"weight out of range", "merge: {services: [{service: web, mode: weighted, weights: [{source: consul, weight: 20000}]}]}",
			"merge.services[0].weights[0].weight", "outside 0..10000"},
		{"all weights zero", "merge: {services: [{service: web, mode: weighted, weights: [{source: consul, weight: 0}]}]}",
			"merge.services[0].weights", "at least one weight must be positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parse([]byte(c.yaml+twoSources), "/d", nil)
			if c.wantKey == "" {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				if c.name == "weighted rule" {
					r := cfg.Merge.Services[0]
					if r.Service != "Web.v2" || len(r.Weights) != 2 || *r.Weights[0].Weight != 90 || r.Weights[1].Source != "consul" {
						t.Errorf("decoded rule = %+v", r)
					}
				}
				return
			}
			var ke *settings.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error = %v, want a *settings.KeyError", err)
			}
			if ke.Key != c.wantKey || !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("error = %q, want key %q and %q", err, c.wantKey, c.wantMsg)
			}
		})
	}
}

func TestMergeDefault(t *testing.T) {
	cfg, err := parse([]byte(twoSources), "/d", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Merge.Default != manager.MergeFirst || cfg.Merge.Services != nil {
		t.Errorf("merge = %+v, want default first and no rules", cfg.Merge)
	}
}
