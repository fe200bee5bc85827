package config

import (
	"reflect"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/doccheck"
	"github.com/xdsbridge/xdsbridge/translate/istio"
)

// transformEntry is what the bridge itself reads of a transforms entry;
// the other keys belong to the transform type (docs/shaping.md).
type transformEntry struct {
	Name string `mapstructure:"name"`
	Type string `mapstructure:"type"`
}

// sourceEntry is what the bridge itself reads of a sources entry; the
// other keys belong to the source type, whose package checks them.
type sourceEntry struct {
	Name       string `mapstructure:"name"`
	Type       string `mapstructure:"type"`
	management `mapstructure:",squash"`
}

// TestReference holds docs/configuration.md to the decoder: every key of
// the bridge's own configuration (Config's mapstructure tags, and those of
// the types its raw sections are decoded into) has a row there and every
// row a key, each default as the code has it. Each source type's package
// checks its own section (plugins, that every built-in has one).
func TestReference(t *testing.T) {
	root, err := doccheck.Root()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := doccheck.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parse([]byte(minimal), "/etc/bridge", nil)
	if err != nil {
		t.Fatal(err)
	}
	w := doccheck.Walker{
		Expand: map[string]reflect.Type{
			"sources[]":     reflect.TypeFor[sourceEntry](),
			"clusters[]":    reflect.TypeFor[rule](),
			"transforms[]":  reflect.TypeFor[transformEntry](),
			"scopes":        reflect.TypeFor[scopesSection](),
			"istio.rules[]": reflect.TypeFor[istio.Rule](),
			"routes[]":      reflect.TypeFor[routeEntry](),
			"listeners[]":   reflect.TypeFor[listenerEntry](),
			"secrets[]":     reflect.TypeFor[Secret](),
			"resources[]":   reflect.TypeFor[ResourceFile](),
		},
		Leaves: []reflect.Type{reflect.TypeFor[sources.Selector]()},
	}
	keys, err := w.Keys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A sources entry's defaults are the guard section's and the
	// startup's, which the walk over Config cannot reach.
	entry, err := doccheck.Walker{}.Keys(sourceEntry{management: defaultManagement(cfg.Guard)})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range entry {
		keys["sources[]."+k] = v
	}
	for k := range defaults {
		if _, ok := keys[k]; !ok {
			t.Errorf("defaults has %s, which Config does not decode", k)
		}
	}
	for _, line := range doccheck.Check(ref, doccheck.Bridge, keys) {
		t.Error(line)
	}

	sel, err := doccheck.Walker{}.Keys(sources.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range doccheck.Check(ref, doccheck.Selector, sel) {
		t.Error(line)
	}
}
