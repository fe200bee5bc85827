package plugins

import (
	"slices"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/doccheck"
)

// builtins is filled by the build-tagged test files, one per built-in.
var builtins []string

func TestBuiltinsRegistered(t *testing.T) {
	for _, name := range builtins {
		if !slices.Contains(sources.Types(), name) {
			t.Errorf("source type %q is not registered; registered: %q", name, sources.Types())
		}
	}
}

// TestReferenceSections checks that docs/configuration.md has a section
// for every built-in source type (whose package holds its keys to it) and
// none for a type that is not built in.
func TestReferenceSections(t *testing.T) {
	root, err := doccheck.Root()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := doccheck.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range builtins {
		if len(ref[name]) == 0 {
			t.Errorf("source type %s has no section (a heading with `type: %s`) in %s", name, name, doccheck.ReferencePath)
		}
	}
	for section := range ref {
		if section != doccheck.Bridge && section != doccheck.Selector && !slices.Contains(builtins, section) {
			t.Errorf("%s has a section for type %s, which is no built-in (%v)", doccheck.ReferencePath, section, builtins)
		}
	}
}
