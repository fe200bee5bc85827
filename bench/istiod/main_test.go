package istiod

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/bench/target"
)

// The test binary doubles as the server process (target.ServeIfChild):
// Run starts `<bin> serve --impl X`.
func TestMain(m *testing.M) {
	target.ServeIfChild()
	goleak.VerifyTestMain(m)
}
