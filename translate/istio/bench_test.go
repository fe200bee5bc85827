package istio

import (
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	mcpv1alpha1 "istio.io/api/mcp/v1alpha1"

	"github.com/xdsbridge/xdsbridge/sources"
)

// What one endpoint change costs on the wire to istiod, in each shape, at
// 10,000 services of 3 instances:
//
//	go test -run '^$' -bench 'EndpointChange|IstiodDecode' -benchtime 20x ./translate/istio/
//
// The byte figures are computed, not timed: sotw-B is the size of the
// DiscoveryResponses istiod receives over its SotW stream (the whole
// collection of each kind that changed: an MCP response replaces the
// collection), delta-B that of a DeltaDiscoveryResponse carrying only the
// changed and removed resources, changed-B the changed resources alone,
// collection-B the collections' total. ns/op is the translation of the
// changed service. BenchmarkIstiodDecode times the decoding istiod does of
// each SotW response (pkg/adsc: every resource unpacked, its body too).

const (
	benchServices  = 10000
	benchInstances = 3
)

// benchMeta are two kinds of instances: "bare" ones carry nothing but an
// address and a port; "consul" ones what the Consul source reports of a
// typical registration (service meta, two tags, the datacenter, a default
// agent's node meta) and a locality.
var benchMeta = map[string]func(e *sources.Endpoint){
	"bare": func(*sources.Endpoint) {},
	"consul": func(e *sources.Endpoint) {
		e.Locality = sources.Locality{Region: "dc1"}
		e.Metadata = map[string]string{
			"version": "v1", "protocol": "http",
			sources.MetaTags: "primary,v1", "tag:primary": "true", "tag:v1": "true",
			"datacenter": "dc1", "node:consul-network-segment": "", "node:consul-version": "1.14.11",
		}
	},
}

func benchFleet(meta func(*sources.Endpoint)) []sources.Service {
	svcs := make([]sources.Service, benchServices)
	for i := range svcs {
		svcs[i].Name = fmt.Sprintf("svc-%05d", i)
		for j := range benchInstances {
			n := i*benchInstances + j
			e := sources.Endpoint{
				Address: fmt.Sprintf("10.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff), Port: 8080,
				Health: sources.HealthHealthy,
			}
			meta(&e)
			svcs[i].Endpoints = append(svcs[i].Endpoints, e)
		}
	}
	return svcs
}

// collections are the resources of every service, by kind and name.
type collections map[Kind]map[string]*mcpv1alpha1.Resource

func (c collections) put(res Result) {
	for _, r := range res.Resources {
		if c[r.Kind] == nil {
			c[r.Kind] = map[string]*mcpv1alpha1.Resource{}
		}
		c[r.Kind][r.Name] = r.Message
	}
}

func (c collections) remove(res Result) {
	for _, r := range res.Resources {
		delete(c[r.Kind], r.Name)
	}
}

// sotw is the DiscoveryResponse of one whole collection.
func (c collections) sotw(tb testing.TB, kind Kind) *discoveryv3.DiscoveryResponse {
	tb.Helper()
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: kind.TypeURLs()[0], VersionInfo: "0123456789abcdef", Nonce: "42"}
	for _, m := range c[kind] {
		resp.Resources = append(resp.Resources, anyOf(tb, m))
	}
	return resp
}

func anyOf(tb testing.TB, m proto.Message) *anypb.Any {
	tb.Helper()
	a, err := anypb.New(m)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// change is one endpoint change of the first service.
type change struct {
	name  string
	apply func(svc *sources.Service)
}

var changes = []change{
	{"unhealthy", func(svc *sources.Service) { svc.Endpoints[1].Health = sources.HealthUnhealthy }},
	{"replaced", func(svc *sources.Service) { svc.Endpoints[1].Address = "192.168.0.1" }},
}

func BenchmarkEndpointChange(b *testing.B) {
	for _, shape := range []Shape{ShapeInline, ShapeWorkloadEntries} {
		for _, meta := range []string{"bare", "consul"} {
			fleet := benchFleet(benchMeta[meta])
			tr := translator(b, Options{Shape: shape})
			all := collections{}
			for _, svc := range fleet {
				all.put(translated(b, tr, svc))
			}
			for _, ch := range changes {
				b.Run(fmt.Sprintf("%s/%s/%s", shape, meta, ch.name), func(b *testing.B) {
					before := translated(b, tr, fleet[0])
					svc := fleet[0].Clone()
					ch.apply(&svc)
					after := translated(b, tr, svc)
					figures := measureChange(b, all, before, after)
					b.ResetTimer()
					for range b.N {
						if _, err := tr.Service(svc); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					for _, f := range figures { // after the loop: ResetTimer drops them
						b.ReportMetric(f.value, f.unit)
					}
				})
			}
		}
	}
}

type figure struct {
	value float64
	unit  string
}

// measureChange returns the bytes sent to istiod when one service's
// resources go from before to after in all (left as it was).
func measureChange(b *testing.B, all collections, before, after Result) []figure {
	b.Helper()
	old := map[string]string{}
	for _, r := range before.Resources {
		old[r.Name] = r.Message.GetMetadata().GetVersion()
	}
	deltas := map[Kind]*discoveryv3.DeltaDiscoveryResponse{}
	delta := func(k Kind) *discoveryv3.DeltaDiscoveryResponse {
		if deltas[k] == nil {
			deltas[k] = &discoveryv3.DeltaDiscoveryResponse{TypeUrl: k.TypeURLs()[0], Nonce: "42"}
		}
		return deltas[k]
	}
	var changedBytes int
	for _, r := range after.Resources {
		v, had := old[r.Name]
		delete(old, r.Name)
		if had && v == r.Message.GetMetadata().GetVersion() {
			continue
		}
		res := &discoveryv3.Resource{Name: r.Name, Version: r.Message.GetMetadata().GetVersion(), Resource: anyOf(b, r.Message)}
		delta(r.Kind).Resources = append(delta(r.Kind).Resources, res)
		changedBytes += proto.Size(res.GetResource())
	}
	for _, r := range before.Resources {
		if _, gone := old[r.Name]; gone {
			delta(r.Kind).RemovedResources = append(delta(r.Kind).RemovedResources, r.Name)
		}
	}
	all.remove(before)
	all.put(after)
	defer func() { all.remove(after); all.put(before) }()
	var sotwBytes, deltaBytes, collectionBytes int
	for k, d := range deltas {
		sotwBytes += proto.Size(all.sotw(b, k))
		deltaBytes += proto.Size(d)
	}
	for k := range all {
		collectionBytes += proto.Size(all.sotw(b, k))
	}
	return []figure{
		{float64(sotwBytes), "sotw-B"}, {float64(deltaBytes), "delta-B"},
		{float64(changedBytes), "changed-B"}, {float64(collectionBytes), "collection-B"},
	}
}

// BenchmarkIstiodDecode times what istiod does with each SotW response
// about an endpoint change: unpack every resource of the collection and
// its body.
func BenchmarkIstiodDecode(b *testing.B) {
	for _, shape := range []Shape{ShapeInline, ShapeWorkloadEntries} {
		b.Run(string(shape), func(b *testing.B) {
			tr := translator(b, Options{Shape: shape})
			all := collections{}
			for _, svc := range benchFleet(benchMeta["consul"]) {
				all.put(translated(b, tr, svc))
			}
			kind := ServiceEntry
			if shape == ShapeWorkloadEntries {
				kind = WorkloadEntry // the collection an endpoint change re-sends
			}
			wire, err := proto.Marshal(all.sotw(b, kind))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(wire)))
			b.ResetTimer()
			for range b.N {
				var resp discoveryv3.DiscoveryResponse
				if err := proto.Unmarshal(wire, &resp); err != nil {
					b.Fatal(err)
				}
				for _, a := range resp.GetResources() {
					var m mcpv1alpha1.Resource
					if err := a.UnmarshalTo(&m); err != nil {
						b.Fatal(err)
					}
					if _, err := m.GetBody().UnmarshalNew(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
