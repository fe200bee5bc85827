package plugins

import (
	"slices"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
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
