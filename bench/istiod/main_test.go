package istiod

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
)

// The test binary doubles as the server process (xdsserver.ServeIfChild):
// Run starts `<bin> serve --impl X`.
func TestMain(m *testing.M) {
	xdsserver.ServeIfChild()
	goleak.VerifyTestMain(m)
}
