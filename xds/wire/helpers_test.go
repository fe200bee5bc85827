package wire

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"weak"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsbridge/xdsbridge/test/testwait"
)

// The type URLs the tests' requests name; the codec treats every type
// alike.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, testwait.Patience, "the condition", cond)
}

func queued(b *Budget) int { return b.Waiting() }

// reachable reports whether the records p points to survive two
// collections: whether anything still holds them.
func reachable(p weak.Pointer[Records]) bool {
	runtime.GC()
	runtime.GC()
	return p.Value() != nil
}

func svcName(i int) string { return "svc-" + strconv.Itoa(i) }

func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = svcName(i)
	}
	return out
}

// reconnectReq is a delta CDS request of a reconnecting Envoy that claims
// to hold n clusters, each at a version the server does not have.
func reconnectReq(n int) *discoveryv3.DeltaDiscoveryRequest {
	r := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType}
	r.InitialResourceVersions = make(map[string]string, n)
	for i := range n {
		r.InitialResourceVersions[svcName(i)] = strings.Repeat("v", 40)
	}
	return r
}
