package translate

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/sources"
)

// marshal returns the deterministic encoding of every resource in r.
func marshal(t testing.TB, r Resources) [][]byte {
	t.Helper()
	var out [][]byte
	for _, m := range []proto.Message{r.Cluster, r.Assignment, r.Listener, r.Route} {
		if m == nil || !m.ProtoReflect().IsValid() {
			out = append(out, nil)
			continue
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// randomService has n endpoints spread over priorities, localities,
// health states and metadata, with some repeated address:port pairs.
func randomService(rng *rand.Rand, n int) sources.Service {
	regions := []string{"", "eu", "us"}
	svc := sources.Service{Name: "svc"}
	for i := range n {
		e := sources.Endpoint{
			Address:  fmt.Sprintf("10.0.%d.%d", rng.IntN(3), rng.IntN(20)),
			Port:     uint32(8000 + rng.IntN(3)),
			Weight:   uint32(rng.IntN(4)),
			Priority: uint32(rng.IntN(3) * 10),
			Health:   sources.Health(rng.IntN(5)),
			Locality: sources.Locality{Region: regions[rng.IntN(3)], Zone: fmt.Sprint("z", rng.IntN(2))},
		}
		if i%2 == 0 {
			e.Metadata = map[string]string{"i": fmt.Sprint(i % 4), "v": "x"}
		}
		svc.Endpoints = append(svc.Endpoints, e)
	}
	return svc
}

func TestDeterminism(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{{"eds", Options{}}, {"grpc", Options{GRPC: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for round := range 20 {
				svc := randomService(rng, 1+rng.IntN(60))
				first, err := Service(svc, tc.opts)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				want := marshal(t, first)
				for shuffle := range 10 {
					s := svc.Clone()
					rng.Shuffle(len(s.Endpoints), func(i, j int) { s.Endpoints[i], s.Endpoints[j] = s.Endpoints[j], s.Endpoints[i] })
					r, err := Service(s, tc.opts)
					if err != nil {
						t.Fatalf("round %d shuffle %d: %v", round, shuffle, err)
					}
					got := marshal(t, r)
					for i := range want {
						if !bytes.Equal(got[i], want[i]) {
							t.Fatalf("round %d shuffle %d: resource %d differs", round, shuffle, i)
						}
					}
				}
			}
		})
	}
}

// TestAssignmentInvariants checks what Envoy and gRPC demand of any
// assignment: contiguous priorities from 0, weights at least 1, one group per
// (priority, locality), unique addresses, every input address present.
func TestAssignmentInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		svc := randomService(rng, rng.IntN(80))
		cla, err := Assignment(svc)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// The copy kept of a repeated address:port is the most preferred one.
		inPrio := map[string]uint32{}
		for _, e := range svc.Endpoints {
			key := fmt.Sprintf("%s:%d", e.Address, e.Port)
			if p, ok := inPrio[key]; !ok || e.Priority < p {
				inPrio[key] = e.Priority
			}
		}
		remap := map[uint32]uint32{} // input priority -> output priority
		seen := map[string]bool{}
		type groupKey struct {
			p uint32
			l string
		}
		groups := map[groupKey]bool{}
		var last uint32
		for gi, g := range cla.Endpoints {
			if gi == 0 && g.Priority != 0 || g.Priority != last && g.Priority != last+1 {
				t.Fatalf("round %d: group %d has priority %d after %d", round, gi, g.Priority, last)
			}
			last = g.Priority
			k := groupKey{g.Priority, g.GetLocality().String()}
			if g.Locality == nil || groups[k] {
				t.Fatalf("round %d: group %d locality missing or repeated: %v", round, gi, k)
			}
			groups[k] = true
			var sum uint32
			for _, lb := range g.LbEndpoints {
				w := lb.GetLoadBalancingWeight().GetValue()
				if w < 1 {
					t.Fatalf("round %d: endpoint weight %d", round, w)
				}
				sum += w
				a := lb.GetEndpoint().GetAddress().GetSocketAddress()
				key := fmt.Sprintf("%s:%d", a.GetAddress(), a.GetPortValue())
				if seen[key] {
					t.Fatalf("round %d: %s twice", round, key)
				}
				seen[key] = true
				if p, ok := remap[inPrio[key]]; ok && p != g.Priority {
					t.Fatalf("round %d: input priority %d became both %d and %d", round, inPrio[key], p, g.Priority)
				}
				remap[inPrio[key]] = g.Priority
			}
			if g.GetLoadBalancingWeight().GetValue() != sum || sum < 1 {
				t.Fatalf("round %d: group weight %d, endpoints sum %d", round, g.GetLoadBalancingWeight().GetValue(), sum)
			}
		}
		for _, e := range svc.Endpoints {
			if key := fmt.Sprintf("%s:%d", e.Address, e.Port); !seen[key] {
				t.Fatalf("round %d: %s missing", round, key)
			}
		}
		ins := slices.Sorted(maps.Keys(remap))
		for i, in := range ins {
			if remap[in] != uint32(i) {
				t.Fatalf("round %d: priorities %v remapped to %v", round, ins, remap)
			}
		}
	}
}

func TestServiceDoesNotModifyInput(t *testing.T) {
	svc := randomService(rand.New(rand.NewPCG(5, 6)), 30)
	before := svc.Clone()
	if _, err := Service(svc, Options{GRPC: true}); err != nil {
		t.Fatal(err)
	}
	if !svc.Equal(before) {
		t.Fatal("Service reordered or changed its input")
	}
}

// TestSharedMessages guards the shared sub-messages: building one service
// must not leak into another's resources.
func TestSharedMessages(t *testing.T) {
	a, err := Service(sources.Service{Name: "a"}, Options{GRPC: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Service(sources.Service{Name: "b"}, Options{GRPC: true, ConnectTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := a.Listener.GetApiListener().GetApiListener().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if got := hcm.GetRds().GetRouteConfigName(); got != "a" {
		t.Errorf("listener a routes to %q", got)
	}
	if got := a.Cluster.GetConnectTimeout().AsDuration(); got != DefaultConnectTimeout {
		t.Errorf("cluster a connect timeout %v", got)
	}
	if a.Cluster.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil {
		t.Error("cluster a lost its ADS config source")
	}
}

func TestValidateAll(t *testing.T) {
	svc := randomService(rand.New(rand.NewPCG(7, 8)), 40)
	svc.Endpoints = append(svc.Endpoints, sources.Endpoint{Address: "2001:db8::1", Port: 65535})
	r, err := Service(svc, Options{GRPC: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []interface{ ValidateAll() error }{r.Cluster, r.Assignment, r.Listener, r.Route} {
		if err := m.ValidateAll(); err != nil {
			t.Errorf("%T: %v", m, err)
		}
	}
	var hcm hcmv3.HttpConnectionManager
	if err := r.Listener.GetApiListener().GetApiListener().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if err := hcm.ValidateAll(); err != nil {
		t.Errorf("http connection manager: %v", err)
	}
	if n := len(hcm.GetHttpFilters()); n != 1 || hcm.HttpFilters[0].GetName() != RouterFilter {
		t.Errorf("http filters = %v, want the router alone", hcm.GetHttpFilters())
	}
}

func TestServiceErrors(t *testing.T) {
	ep := sources.Endpoint{Address: "10.0.0.1", Port: 80}
	with := func(f func(*sources.Endpoint)) []sources.Endpoint {
		e := ep
		f(&e)
		return []sources.Endpoint{ep, e}
	}
	for _, tc := range []struct {
		name string
		svc  sources.Service
		opts Options
		want string
	}{
		{"empty name", sources.Service{}, Options{}, "empty name"},
		{"host name", sources.Service{Name: "web", Endpoints: with(func(e *sources.Endpoint) { e.Address = "db.local" })}, Options{}, "not an IP"},
		{"port 0", sources.Service{Name: "web", Endpoints: with(func(e *sources.Endpoint) { e.Port = 0 })}, Options{}, "port 0"},
		{"port too big", sources.Service{Name: "web", Endpoints: with(func(e *sources.Endpoint) { e.Port = 70000 })}, Options{}, "port 70000"},
		{"bad health", sources.Service{Name: "web", Endpoints: with(func(e *sources.Endpoint) { e.Port, e.Health = 81, 9 })}, Options{}, "unknown health(9)"},
		{"weight overflow", sources.Service{Name: "web", Endpoints: []sources.Endpoint{
			{Address: "10.0.0.1", Port: 80, Weight: math.MaxUint32},
			{Address: "10.0.0.2", Port: 80, Weight: 1, Locality: sources.Locality{Zone: "b"}},
		}}, Options{}, "sum beyond"},
		{"negative timeout", sources.Service{Name: "web"}, Options{ConnectTimeout: -time.Second}, "validating cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Service(tc.svc, tc.opts)
			if err == nil {
				t.Fatalf("no error; got %v", r)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.svc.Name)) {
				t.Errorf("error %q does not name the service and contain %q", err, tc.want)
			}
		})
	}
}

func TestWeightLimit(t *testing.T) {
	// A whole priority may carry exactly MaxUint32, split over localities.
	svc := sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 80, Weight: math.MaxUint32 - 1},
		{Address: "10.0.0.2", Port: 80, Weight: 1, Locality: sources.Locality{Zone: "b"}},
		{Address: "10.0.0.3", Port: 80, Weight: math.MaxUint32, Priority: 1},
	}}
	cla, err := Assignment(svc)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Collect(func(yield func(uint32) bool) {
		for _, g := range cla.Endpoints {
			if !yield(g.GetLoadBalancingWeight().GetValue()) {
				return
			}
		}
	})
	if want := []uint32{math.MaxUint32 - 1, 1, math.MaxUint32}; !slices.Equal(got, want) {
		t.Errorf("locality weights %v, want %v", got, want)
	}
}

func TestHealthMapping(t *testing.T) {
	for h, want := range map[sources.Health]corev3.HealthStatus{
		sources.HealthUnknown:   corev3.HealthStatus_UNKNOWN,
		sources.HealthHealthy:   corev3.HealthStatus_HEALTHY,
		sources.HealthUnhealthy: corev3.HealthStatus_UNHEALTHY,
		sources.HealthDegraded:  corev3.HealthStatus_DEGRADED,
		sources.HealthDraining:  corev3.HealthStatus_DRAINING,
	} {
		cla, err := Assignment(sources.Service{Name: "web", Endpoints: []sources.Endpoint{{Address: "10.0.0.1", Port: 80, Health: h}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := cla.Endpoints[0].LbEndpoints[0].GetHealthStatus(); got != want {
			t.Errorf("%v: got %v, want %v", h, got, want)
		}
	}
}

var sink *endpointv3.ClusterLoadAssignment

func BenchmarkService(b *testing.B) {
	svc := sources.Service{Name: "web"}
	for i := range 10 {
		svc.Endpoints = append(svc.Endpoints, sources.Endpoint{
			Address:  fmt.Sprintf("10.0.%d.%d", i%2, 10-i),
			Port:     8080,
			Weight:   uint32(i % 3),
			Health:   sources.HealthHealthy,
			Locality: sources.Locality{Region: "eu", Zone: fmt.Sprint("eu-1", "ab"[i%2:i%2+1])},
			Metadata: map[string]string{"version": "v1"},
		})
	}
	for _, bc := range []struct {
		name string
		opts Options
	}{{"eds", Options{}}, {"grpc", Options{GRPC: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0, ok := cpuTime()
			for b.Loop() {
				r, err := Service(svc, bc.opts)
				if err != nil {
					b.Fatal(err)
				}
				sink = r.Assignment
			}
			if cpu1, _ := cpuTime(); ok && b.N > 0 {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// TestValidateAssignment checks that the shortcut validation agrees with
// ValidateAll, also on broken assignments, and leaves the assignment intact.
func TestValidateAssignment(t *testing.T) {
	svc := sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 80, Metadata: map[string]string{"v": "1"}},
		{Address: "10.0.0.2", Port: 80, Metadata: map[string]string{"v": "1"}},
		{Address: "10.0.0.3", Port: 80},
		{Address: "10.0.0.4", Port: 80, Priority: 1, Metadata: map[string]string{"v": "2"}},
	}}
	for _, tc := range []struct {
		name   string
		mutate func(*endpointv3.ClusterLoadAssignment)
	}{
		{"valid", func(*endpointv3.ClusterLoadAssignment) {}},
		{"bad metadata key", func(c *endpointv3.ClusterLoadAssignment) {
			md := c.Endpoints[1].LbEndpoints[0].Metadata
			md.FilterMetadata[""] = md.FilterMetadata[MetadataNamespace]
		}},
		{"zero weight", func(c *endpointv3.ClusterLoadAssignment) { c.Endpoints[0].LbEndpoints[1].LoadBalancingWeight.Value = 0 }},
		{"no cluster name", func(c *endpointv3.ClusterLoadAssignment) { c.ClusterName = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cla, err := Assignment(svc)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(cla)
			before := proto.Clone(cla)
			want := cla.ValidateAll()
			got := validateAssignment(cla)
			if (got == nil) != (want == nil) || (want == nil) != (tc.name == "valid") {
				t.Errorf("validateAssignment = %v, ValidateAll = %v", got, want)
			}
			if !proto.Equal(cla, before) {
				t.Error("validateAssignment changed the assignment")
			}
		})
	}
}
