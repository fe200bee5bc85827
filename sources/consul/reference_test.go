package consul

import (
	"testing"

	"github.com/xdsbridge/xdsbridge/test/doccheck"
)

// TestReference holds the section of this source type in
// docs/configuration.md to Config: every key documented, with the default
// a key left out keeps, and no key the decoder does not know.
func TestReference(t *testing.T) {
	var cfg Config
	cfg.defaults()
	doccheck.CheckSource(t, TypeName, cfg)
}
