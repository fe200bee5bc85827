//go:build !no_transforms

package plugins

import (
	"slices"
	"testing"

	"github.com/xdsbridge/xdsbridge/transform"
)

func TestBuiltinTransformsRegistered(t *testing.T) {
	for _, name := range []string{"exclude", "include", "locality", "metadata", "override", "rename"} {
		if !slices.Contains(transform.Types(), name) {
			t.Errorf("transform type %q is not registered; registered: %q", name, transform.Types())
		}
	}
}
