// Package workload is the benchmark's world: N services of E endpoints and a
// numbered sequence of single-endpoint changes. It is a pure function of its
// parameters, so the server process under test and the load generator build
// identical resources without shipping them: the server applies change k,
// the load generator knows what every client must then hold.
package workload

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
)

// Spec sizes the world.
type Spec struct {
	Services  int
	Endpoints int // per service
}

// Validate reports a spec that cannot be built.
func (s Spec) Validate() error {
	if s.Services < 1 || s.Endpoints < 1 {
		return fmt.Errorf("workload needs at least 1 service and 1 endpoint, got %d x %d", s.Services, s.Endpoints)
	}
	if s.Services*s.Endpoints > 1<<24 {
		return fmt.Errorf("workload of %d endpoints exceeds the 10.0.0.0/8 address plan", s.Services*s.Endpoints)
	}
	return nil
}

// Name is the name of service i (its cluster and assignment name).
func Name(i int) string { return fmt.Sprintf("svc-%05d", i) }

// Target is the service that change k (k >= 1) modifies. Consecutive changes
// hit different services spread over the whole set, so changes in flight at
// the same time (sustained churn) never touch the same service.
func (s Spec) Target(k int) int { return (k*7919 + 13) % s.Services }

// Service returns service i as it is after change k modified it; k = 0 is
// its initial state. A change sets the weight of endpoint 0 to 2+k, so each
// change is a single-endpoint change with content no other change has.
func (s Spec) Service(i, k int) sources.Service {
	svc := sources.Service{Name: Name(i), Endpoints: make([]sources.Endpoint, s.Endpoints)}
	zones := [...]string{"a", "b", "c"}
	for j := range svc.Endpoints {
		n := i*s.Endpoints + j + 1
		svc.Endpoints[j] = sources.Endpoint{
			Address:  fmt.Sprintf("10.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff),
			Port:     uint32(8000 + j),
			Weight:   1,
			Health:   sources.HealthHealthy,
			Locality: sources.Locality{Region: "bench", Zone: "bench-" + zones[j%len(zones)]},
		}
	}
	if k > 0 {
		svc.Endpoints[0].Weight = uint32(2 + k)
	}
	return svc
}

// Resources are the Envoy resources of one service.
type Resources struct {
	Cluster    *clusterv3.Cluster
	Assignment *endpointv3.ClusterLoadAssignment
}

// Build translates service i after change k with the bridge's translate
// package, so every implementation serves exactly what the bridge would.
func (s Spec) Build(i, k int) (Resources, error) {
	r, err := translate.Service(s.Service(i, k), translate.Options{})
	if err != nil {
		return Resources{}, fmt.Errorf("building workload service %d: %w", i, err)
	}
	return Resources{Cluster: r.Cluster, Assignment: r.Assignment}, nil
}

// World tracks the last change applied to each service.
type World struct {
	Spec Spec
	last []int
}

// NewWorld returns the world in its initial state.
func NewWorld(s Spec) *World { return &World{Spec: s, last: make([]int, s.Services)} }

// Apply records change k and returns the service it modified.
func (w *World) Apply(k int) int {
	i := w.Spec.Target(k)
	w.last[i] = k
	return i
}

// Last is the last change applied to service i (0 = none).
func (w *World) Last(i int) int { return w.last[i] }
