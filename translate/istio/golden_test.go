package istio

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/golden"
)

// healthy returns a healthy endpoint at addr:port with the given metadata
// (key, value pairs).
func healthy(addr string, port uint32, meta ...string) sources.Endpoint {
	e := sources.Endpoint{Address: addr, Port: port, Health: sources.HealthHealthy}
	if len(meta) > 0 {
		e.Metadata = map[string]string{}
		for i := 0; i+1 < len(meta); i += 2 {
			e.Metadata[meta[i]] = meta[i+1]
		}
	}
	return e
}

func with(e sources.Endpoint, f func(*sources.Endpoint)) sources.Endpoint {
	f(&e)
	return e
}

// goldenCases are named services whose translation, in both shapes, is
// pinned in testdata/<name>.<shape>.golden.
var goldenCases = []struct {
	name string
	svc  sources.Service
	opts Options
	// shapes are the shapes the case is pinned in; nil is both.
	shapes []Shape
}{
	{name: "ports-protocols", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		healthy("10.0.0.1", 8080, "protocol", "http"),
		healthy("10.0.0.2", 8080, "protocol", "HTTP"),
		healthy("10.0.0.3", 9090, "tags", "protocol=http"),
		healthy("10.0.0.4", 8080), // declares nothing: takes the service's
		healthy("10.0.0.5", 8080, "protocol", "grpc"),
		healthy("10.0.0.6", 8080, "protocol", "thrift"),
	}}},
	{name: "default-protocol", svc: sources.Service{Name: "db", Endpoints: []sources.Endpoint{
		healthy("10.0.0.2", 5432), healthy("10.0.0.1", 5432),
	}}},
	{name: "locality", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		with(healthy("10.0.0.1", 80), func(e *sources.Endpoint) {
			e.Locality = sources.Locality{Region: "eu", Zone: "eu-1a", SubZone: "rack2"}
		}),
		with(healthy("10.0.0.2", 80), func(e *sources.Endpoint) { e.Locality = sources.Locality{Region: "eu", Zone: "eu-1b"} }),
		with(healthy("10.0.0.3", 80), func(e *sources.Endpoint) { e.Locality = sources.Locality{Region: "dc1"} }),
		with(healthy("10.0.0.4", 80), func(e *sources.Endpoint) { e.Locality = sources.Locality{Zone: "z-only"} }),
		healthy("10.0.0.5", 80),
		with(healthy("10.0.0.6", 80), func(e *sources.Endpoint) { e.Locality = sources.Locality{Region: "eu", Zone: "a/b"} }),
	}}},
	{name: "labels", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		healthy("10.0.0.1", 80,
			"version", "v1", // service meta
			"datacenter", "dc1", // the Consul source's
			"node:rack", "r 12", // node meta: key and value sanitised
			"tags", "canary,team=payments,tier|gold,Weird Tag!,version=v9",
			"tag:canary", "true", "tag:team=payments", "true", "tag:tier|gold", "true", "tag:Weird Tag!", "true", "tag:version=v9", "true",
			"app.kubernetes.io/name", "web", // a valid prefixed key, kept
			"commit", "0123456789012345678901234567890123456789012345678901234567890123456789", // longer than 63
			"-", "a key that maps onto nothing",
		),
	}}},
	{name: "weights", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		with(healthy("10.0.0.1", 80), func(e *sources.Endpoint) { e.Weight = 0 }),
		with(healthy("10.0.0.2", 80), func(e *sources.Endpoint) { e.Weight = 1 }),
		with(healthy("10.0.0.3", 80), func(e *sources.Endpoint) { e.Weight = 5 }),
		with(healthy("10.0.0.4", 80), func(e *sources.Endpoint) { e.Weight = 128 }),
	}}},
	{name: "health", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		with(healthy("10.0.0.1", 80), func(e *sources.Endpoint) { e.Health = sources.HealthUnknown }),
		healthy("10.0.0.2", 80),
		with(healthy("10.0.0.3", 80), func(e *sources.Endpoint) { e.Health = sources.HealthUnhealthy }),
		with(healthy("10.0.0.4", 80), func(e *sources.Endpoint) { e.Health = sources.HealthDegraded }),
		with(healthy("10.0.0.5", 80), func(e *sources.Endpoint) { e.Health = sources.HealthDraining }),
	}}},
	{name: "all-unhealthy", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		with(healthy("10.0.0.1", 8080, "protocol", "http"), func(e *sources.Endpoint) { e.Health = sources.HealthUnhealthy }),
		with(healthy("10.0.0.2", 8080, "protocol", "http"), func(e *sources.Endpoint) { e.Health = sources.HealthDraining }),
	}}},
	{name: "priorities", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		with(healthy("10.0.0.1", 80), func(e *sources.Endpoint) { e.Health = sources.HealthUnhealthy }),
		with(healthy("10.1.0.1", 80), func(e *sources.Endpoint) { e.Priority = 1; e.Locality.Region = "dc2" }),
		with(healthy("10.1.0.2", 80), func(e *sources.Endpoint) { e.Priority = 1; e.Locality.Region = "dc2" }),
		with(healthy("10.2.0.1", 80), func(e *sources.Endpoint) { e.Priority = 2; e.Locality.Region = "dc3" }),
	}}},
	{name: "duplicates", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		with(healthy("10.0.0.1", 80), func(e *sources.Endpoint) { e.Weight = 3 }),
		with(healthy("10.0.0.1", 80), func(e *sources.Endpoint) { e.Weight = 7; e.Locality.Region = "other" }),
		healthy("10.0.0.1", 81),
	}}},
	{name: "ipv6", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		healthy("2001:db8::2", 443, "protocol", "https"),
		healthy("::ffff:10.0.0.1", 443, "protocol", "https"),
		healthy("10.0.0.1", 443, "protocol", "https"),
	}}},
	{name: "empty", svc: sources.Service{Name: "web"}},
	{name: "sanitised-name", svc: sources.Service{Name: "Payments.V2", Source: "Consul-EU", Endpoints: []sources.Endpoint{
		healthy("10.0.0.1", 80),
	}}, opts: Options{Host: "{service}.{source}.example.org"}},
	{name: "rules", svc: sources.Service{Name: "payments", Source: "consul", Endpoints: []sources.Endpoint{
		healthy("10.0.0.1", 8443, "team", "money"),
	}}, opts: Options{ExportTo: []string{"*"}, Rules: []Rule{
		{Match: sources.Selector{Sources: []string{"consul"}}, Namespace: "consul", ExportTo: []string{"."}},
		{Match: sources.Selector{Services: []string{"pay*"}}, ExportTo: []string{".", "shop"}, Port: 443},
		{Match: sources.Selector{Services: []string{"nomatch"}}, Namespace: "never"},
		{Match: sources.Selector{Metadata: map[string]string{"team": "money"}}, Namespace: "money"},
	}}},
	{name: "external", svc: sources.Service{Name: "saas", Endpoints: []sources.Endpoint{
		healthy("192.0.2.10", 443, "protocol", "tls"),
	}}, opts: Options{Location: "MESH_EXTERNAL", Rules: []Rule{
		{Match: sources.Selector{Services: []string{"web"}}, Location: "MESH_INTERNAL"},
	}}, shapes: []Shape{ShapeInline}}, // a workload selector is for MESH_INTERNAL entries only
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		shapes := tc.shapes
		if shapes == nil {
			shapes = []Shape{ShapeInline, ShapeWorkloadEntries}
		}
		for _, shape := range shapes {
			t.Run(tc.name+"/"+string(shape), func(t *testing.T) {
				opts := tc.opts
				opts.Shape = shape
				tr, err := New(opts)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				res, err := tr.Service(tc.svc)
				if err != nil {
					t.Fatalf("Service: %v", err)
				}
				golden.Check(t, filepath.Join("testdata", tc.name+"."+string(shape)+".golden"), renderResult(t, res))
			})
		}
	}
}

// renderResult prints res as indented JSON, each resource as protojson
// (body unpacked from its Any) re-indented by encoding/json, since
// protojson varies its whitespace on purpose.
func renderResult(t *testing.T, res Result) []byte {
	t.Helper()
	type resource struct {
		Kind     Kind            `json:"kind"`
		Name     string          `json:"name"`
		Resource json.RawMessage `json:"resource"`
	}
	type dropped struct {
		Endpoint string `json:"endpoint"`
		Error    string `json:"error"`
	}
	doc := struct {
		Resources []resource `json:"resources"`
		Dropped   []dropped  `json:"dropped,omitempty"`
		Unhealthy int        `json:"unhealthy,omitempty"`
		Standby   int        `json:"standby,omitempty"`
	}{Unhealthy: res.Unhealthy, Standby: res.Standby}
	for _, r := range res.Resources {
		b, err := protojson.Marshal(r.Message)
		if err != nil {
			t.Fatalf("marshalling %s: %v", r.Name, err)
		}
		doc.Resources = append(doc.Resources, resource{Kind: r.Kind, Name: r.Name, Resource: b})
	}
	for _, d := range res.Dropped {
		doc.Dropped = append(doc.Dropped, dropped{Endpoint: d.Endpoint, Error: d.Err.Error()})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}
