package istio

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	mcpv1alpha1 "istio.io/api/mcp/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"

	"github.com/xdsbridge/xdsbridge/sources"
)

func translator(t testing.TB, opts Options) *Translator {
	t.Helper()
	tr, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tr
}

func translated(t testing.TB, tr *Translator, svc sources.Service) Result {
	t.Helper()
	res, err := tr.Service(svc)
	if err != nil {
		t.Fatalf("Service: %v", err)
	}
	return res
}

// sample is a service with labels, localities and weights, so that map
// order and endpoint order have every chance to show in the output.
func sample() sources.Service {
	var eps []sources.Endpoint
	for i := range 12 {
		eps = append(eps, sources.Endpoint{
			Address: fmt.Sprintf("10.0.%d.%d", i%3, i), Port: 8080 + uint32(i%2), Weight: uint32(i),
			Health:   sources.HealthHealthy,
			Locality: sources.Locality{Region: "eu", Zone: fmt.Sprintf("z%d", i%3)},
			Metadata: map[string]string{"version": fmt.Sprint("v", i%2), "protocol": "http", "tags": "a,b,c", "tag:a": "true", "k" + fmt.Sprint(i): "x"},
		})
	}
	return sources.Service{Name: "web", Source: "consul", Endpoints: eps}
}

func marshalAll(t *testing.T, res Result) [][]byte {
	t.Helper()
	out := make([][]byte, len(res.Resources))
	for i, r := range res.Resources {
		b, err := deterministic.Marshal(r.Message)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func TestDeterministicWhateverTheOrder(t *testing.T) {
	for _, shape := range []Shape{ShapeInline, ShapeWorkloadEntries} {
		t.Run(string(shape), func(t *testing.T) {
			tr := translator(t, Options{Shape: shape})
			svc := sample()
			want := marshalAll(t, translated(t, tr, svc))
			rng := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				shuffled := svc.Clone()
				rng.Shuffle(len(shuffled.Endpoints), func(i, j int) {
					shuffled.Endpoints[i], shuffled.Endpoints[j] = shuffled.Endpoints[j], shuffled.Endpoints[i]
				})
				got := marshalAll(t, translated(t, tr, shuffled))
				if !slices.EqualFunc(got, want, bytes.Equal) {
					t.Fatal("the same service in another endpoint order gave other bytes")
				}
			}
		})
	}
}

// TestBodyMarshalledDeterministically checks the body inside the Any: a
// body marshalled without deterministic ordering would put the labels and
// port maps in random order, and the same content would get other bytes
// and another version from one call to the next.
func TestBodyMarshalledDeterministically(t *testing.T) {
	tr := translator(t, Options{})
	first := translated(t, tr, sample()).Resources[0].Message
	for range 30 {
		again := translated(t, tr, sample()).Resources[0].Message
		if !bytes.Equal(again.GetBody().GetValue(), first.GetBody().GetValue()) {
			t.Fatal("the same service gave another body")
		}
		if again.GetMetadata().GetVersion() != first.GetMetadata().GetVersion() {
			t.Fatal("the same service gave another version")
		}
	}
}

func TestVersionFollowsContent(t *testing.T) {
	tr := translator(t, Options{})
	svc := sample()
	before := translated(t, tr, svc).Resources[0]
	svc.Endpoints[3].Weight = 99
	after := translated(t, tr, svc).Resources[0]
	if before.Name != after.Name {
		t.Fatalf("name changed from %s to %s", before.Name, after.Name)
	}
	if before.Message.GetMetadata().GetVersion() == after.Message.GetMetadata().GetVersion() {
		t.Fatal("a changed endpoint left the version as it was: istiod would keep the old entry")
	}
	m := proto.Clone(after.Message).(*mcpv1alpha1.Resource)
	m.Metadata.Version = ""
	b, err := deterministic.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if v := strconv.FormatUint(xxhash.Sum64(b), 16); v != after.Message.GetMetadata().GetVersion() {
		t.Fatalf("version %s is not the content hash %s", after.Message.GetMetadata().GetVersion(), v)
	}
}

// TestIstiodReadsThem decodes each resource the way istiod's ADS client
// does (pkg/adsc: an Any of mcp Resource, metadata name split at "/" into
// exactly namespace and name, the body unpacked from the global registry)
// and checks the result.
func TestIstiodReadsThem(t *testing.T) {
	for _, shape := range []Shape{ShapeInline, ShapeWorkloadEntries} {
		t.Run(string(shape), func(t *testing.T) {
			res := translated(t, translator(t, Options{Shape: shape}), sample())
			for _, r := range res.Resources {
				a, err := anypb.New(r.Message)
				if err != nil {
					t.Fatal(err)
				}
				if a.GetTypeUrl() != ResourceTypeURL {
					t.Fatalf("resource type URL %s, want %s", a.GetTypeUrl(), ResourceTypeURL)
				}
				var m mcpv1alpha1.Resource
				if err := a.UnmarshalTo(&m); err != nil {
					t.Fatal(err)
				}
				if parts := strings.Split(m.GetMetadata().GetName(), "/"); len(parts) != 2 || m.GetMetadata().GetName() != r.Name {
					t.Fatalf("metadata name %q: istiod wants namespace/name", m.GetMetadata().GetName())
				}
				body, err := m.GetBody().UnmarshalNew()
				if err != nil {
					t.Fatal(err)
				}
				switch b := body.(type) {
				case *networkingv1alpha3.ServiceEntry:
					if r.Kind != ServiceEntry || len(b.GetHosts()) != 1 {
						t.Fatalf("%s: a %s with hosts %v", r.Name, r.Kind, b.GetHosts())
					}
				case *networkingv1alpha3.WorkloadEntry:
					if r.Kind != WorkloadEntry || b.GetAddress() == "" {
						t.Fatalf("%s: a %s with address %q", r.Name, r.Kind, b.GetAddress())
					}
				default:
					t.Fatalf("%s: body is a %T", r.Name, body)
				}
			}
		})
	}
}

func TestInvalidHostFailsTheService(t *testing.T) {
	tr := translator(t, Options{})
	_, err := tr.Service(sources.Service{Name: "web_api", Endpoints: []sources.Endpoint{healthy("10.0.0.1", 80)}})
	if err == nil || !strings.Contains(err.Error(), `"web_api.service.consul"`) || !strings.Contains(err.Error(), `service "web_api"`) {
		t.Fatalf("error %v; want one naming the service and its host", err)
	}
}

func TestInvalidExportToCombinationFailsTheService(t *testing.T) {
	// Each rule is valid alone; together they export the entry to its own
	// namespace twice, which istiod refuses.
	tr := translator(t, Options{Rules: []Rule{
		{Match: sources.Selector{Services: []string{"web"}}, ExportTo: []string{".", "shop"}},
		{Match: sources.Selector{Services: []string{"web"}}, Namespace: "shop"},
	}})
	if _, err := tr.Service(sources.Service{Name: "web"}); err == nil || !strings.Contains(err.Error(), "exportTo") {
		t.Fatalf("error %v; want the exportTo rule", err)
	}
}

// TestWorkloadEntriesChangeAlone checks what the WorkloadEntry shape is
// for: when one endpoint changes, the other endpoints' resources and the
// ServiceEntry keep their names and versions.
func TestWorkloadEntriesChangeAlone(t *testing.T) {
	tr := translator(t, Options{Shape: ShapeWorkloadEntries})
	svc := sample()
	before := versions(translated(t, tr, svc))
	svc.Endpoints[5].Metadata["version"] = "v7"
	after := versions(translated(t, tr, svc))
	var changed []string
	for name, v := range after {
		if before[name] != v {
			changed = append(changed, name)
		}
	}
	if want := []string{"xdsbridge/web-10-0-2-5-8081"}; !slices.Equal(changed, want) {
		t.Fatalf("changed %v, want %v", changed, want)
	}
	if len(before) != len(after) {
		t.Fatalf("%d resources became %d", len(before), len(after))
	}
}

func versions(res Result) map[string]string {
	out := map[string]string{}
	for _, r := range res.Resources {
		out[r.Name] = r.Message.GetMetadata().GetVersion()
	}
	return out
}

func TestProtocolVote(t *testing.T) {
	tr := translator(t, Options{})
	for _, tc := range []struct {
		name string
		eps  []sources.Endpoint
		want string
	}{
		{name: "none declared", eps: []sources.Endpoint{healthy("10.0.0.1", 80)}, want: "TCP"},
		{name: "majority", eps: []sources.Endpoint{
			healthy("10.0.0.1", 80, "protocol", "grpc"), healthy("10.0.0.2", 80, "protocol", "http"), healthy("10.0.0.3", 80, "protocol", "Http"),
		}, want: "HTTP"},
		{name: "tie goes to Istio's order", eps: []sources.Endpoint{
			healthy("10.0.0.1", 80, "protocol", "http"), healthy("10.0.0.2", 80, "protocol", "grpc"),
		}, want: "GRPC"},
		{name: "unhealthy instances vote", eps: []sources.Endpoint{
			healthy("10.0.0.1", 80, "protocol", "http2"),
			with(healthy("10.0.0.2", 80, "protocol", "grpc"), func(e *sources.Endpoint) { e.Health = sources.HealthUnhealthy }),
			with(healthy("10.0.0.3", 80, "protocol", "grpc"), func(e *sources.Endpoint) { e.Health = sources.HealthUnhealthy }),
		}, want: "GRPC"},
		{name: "tag", eps: []sources.Endpoint{healthy("10.0.0.1", 80, "tags", "x,protocol=mongo")}, want: "Mongo"},
		{name: "unsupported is no vote", eps: []sources.Endpoint{
			healthy("10.0.0.1", 80, "protocol", "thrift"), healthy("10.0.0.2", 80, "protocol", "thrift"), healthy("10.0.0.3", 80, "protocol", "tls"),
		}, want: "TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tr.protocolOf(tc.eps); got != tc.want {
				t.Fatalf("protocol %s, want %s", got, tc.want)
			}
		})
	}
	custom := translator(t, Options{ProtocolKey: "proto", DefaultProtocol: "http2"})
	if got := custom.protocolOf([]sources.Endpoint{healthy("10.0.0.1", 80, "protocol", "grpc")}); got != "HTTP2" {
		t.Fatalf("with protocol_key proto, protocol %s, want the default HTTP2", got)
	}
}

func TestServicePort(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports []uint32
		want  uint32
	}{
		{name: "none", want: 0},
		{name: "one", ports: []uint32{9090}, want: 9090},
		{name: "most common", ports: []uint32{9090, 8080, 8080, 7070}, want: 8080},
		{name: "tie goes to the lowest", ports: []uint32{9090, 8080, 9090, 8080}, want: 8080},
		{name: "port 0 never wins", ports: []uint32{0, 12336}, want: 12336},
		{name: "only port 0", ports: []uint32{0, 0}, want: 0},
		// Dynamic ports: a port of the instances would move with each one
		// registered on a lower port (a client calling web:44911 lost the
		// service when an instance on 35465 came), so the default holds.
		{name: "each on a port of its own", ports: []uint32{44911, 46509}, want: DefaultPort},
		{name: "one more on a lower port of its own", ports: []uint32{44911, 46509, 35465}, want: DefaultPort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var eps []sources.Endpoint
			for i, p := range tc.ports {
				eps = append(eps, healthy(fmt.Sprintf("10.0.0.%d", i), p))
			}
			if got := servicePort(eps, DefaultPort); got != tc.want {
				t.Fatalf("port %d, want %d", got, tc.want)
			}
		})
	}
}

// TestServicePortStaysWithDynamicPorts: a service whose instances each
// have a port of their own keeps its service port, the section's
// default_port, while instances come and go; their endpoints map it to
// their own ports.
func TestServicePortStaysWithDynamicPorts(t *testing.T) {
	tr := translator(t, Options{DefaultPort: 7000})
	var eps []sources.Endpoint
	for i, p := range []uint32{44911, 46509, 35465, 30001} {
		eps = append(eps, healthy(fmt.Sprintf("10.0.0.%d", i+1), p, "protocol", "grpc"))
		if i == 0 {
			continue // one instance: its own port
		}
		res, err := tr.Service(sources.Service{Name: "web", Endpoints: eps})
		if err != nil {
			t.Fatal(err)
		}
		se := res.Resources[0].Message.GetBody()
		var entry networkingv1alpha3.ServiceEntry
		if err := se.UnmarshalTo(&entry); err != nil {
			t.Fatal(err)
		}
		if got := entry.GetPorts(); len(got) != 1 || got[0].GetNumber() != 7000 {
			t.Fatalf("%d instances: ports %v, want the default 7000", i+1, got)
		}
		for j, ep := range entry.GetEndpoints() {
			if ep.GetPorts()["grpc"] == 0 {
				t.Fatalf("%d instances: endpoint %d maps no port: %v", i+1, j, ep)
			}
		}
	}
}

// TestRulesApplyInOrder checks that a later matching rule overrides what
// an earlier one set, and only that.
func TestRulesApplyInOrder(t *testing.T) {
	tr := translator(t, Options{Namespace: "mesh", Rules: []Rule{
		{Match: sources.Selector{Services: []string{"*"}}, Namespace: "first", ExportTo: []string{"*"}},
		{Match: sources.Selector{Tags: []string{"canary"}}, Namespace: "second", Port: 80},
		{Match: sources.Selector{Sources: []string{"dns"}}, Namespace: "never"},
	}})
	svc := sources.Service{Name: "web", Source: "consul", Endpoints: []sources.Endpoint{healthy("10.0.0.1", 8080, "tags", "canary")}}
	got := tr.resolve(svc)
	if got.namespace != "second" || !slices.Equal(got.exportTo, []string{"*"}) || got.port != 80 ||
		got.location != networkingv1alpha3.ServiceEntry_MESH_INTERNAL {
		t.Fatalf("settings %+v", got)
	}
	svc.Endpoints[0].Metadata = nil
	if got := tr.resolve(svc); got.namespace != "first" || got.port != 0 {
		t.Fatalf("without the tag, settings %+v", got)
	}
}
