package xdsserver

import (
	"fmt"
	"testing"
	"time"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/istiodsim"
	"github.com/xdsbridge/xdsbridge/translate/istio"
)

// TestIstioImplsServeIstiod checks each shape's server end to end: an
// istiod-like client gets every collection it asks for, the workload's
// services as ServiceEntries (and their instances as WorkloadEntries), and
// a change's new weight.
func TestIstioImplsServeIstiod(t *testing.T) {
	spec := workload.Spec{Services: 20, Endpoints: 3}
	for _, impl := range IstioImpls {
		t.Run(impl, func(t *testing.T) {
			xdsAddr, control := serve(t, impl, 0)
			post(t, control, fmt.Sprintf("/load?services=%d&endpoints=%d", spec.Services, spec.Endpoints))
			c := istiodsim.Dial(t, xdsAddr, istiodsim.Options{})
			entries, carrier, want := istio.ServiceEntry.TypeURLs()[0], istio.ServiceEntry.TypeURLs()[0], spec.Services
			if impl == "istio-workload_entries" {
				carrier, want = istio.WorkloadEntry.TypeURLs()[0], spec.Services*spec.Endpoints
			}
			c.Wait(t, 20*time.Second, "the initial collections", func() bool {
				return c.Synced() && len(c.Collection(entries)) == spec.Services && len(c.Collection(carrier)) == want
			})
			w := workload.NewWorld(spec)
			for _, k := range []int{1, 2} {
				i := w.Apply(k)
				post(t, control, fmt.Sprintf("/change?k=%d", k))
				ep := spec.Service(i, k).Endpoints[0]
				c.Wait(t, 20*time.Second, fmt.Sprintf("change %d's weight", k), func() bool {
					return weightOf(c.Collection(carrier), ep.Address) == ep.Weight
				})
			}
		})
	}
}

// weightOf is the weight of the endpoint of address addr in a ServiceEntry
// or WorkloadEntry collection (0 if none).
func weightOf(rs map[string]istiodsim.Resource, addr string) uint32 {
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *networkingv1alpha3.WorkloadEntry:
			if b.GetAddress() == addr {
				return b.GetWeight()
			}
		case *networkingv1alpha3.ServiceEntry:
			for _, e := range b.GetEndpoints() {
				if e.GetAddress() == addr {
					return e.GetWeight()
				}
			}
		}
	}
	return 0
}
