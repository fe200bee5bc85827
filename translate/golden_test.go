package translate

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/golden"
)

type goldenCase struct {
	name string
	svc  sources.Service
	opts Options
}

// goldenCases are named services whose translation is pinned in
// testdata/<name>.golden.
var goldenCases = []goldenCase{
	{name: "basic", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.2", Port: 8080, Weight: 10, Health: sources.HealthHealthy},
		{Address: "10.0.0.1", Port: 8080, Weight: 20, Health: sources.HealthHealthy},
	}}},
	{name: "weights", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 80, Weight: 0},
		{Address: "10.0.0.2", Port: 80},
		{Address: "10.0.0.3", Port: 80, Weight: 5},
	}}},
	{name: "priorities", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.3", Port: 80, Priority: 30},
		{Address: "10.0.0.1", Port: 80, Priority: 10},
		{Address: "10.0.0.2", Port: 80, Priority: 20, Weight: 3},
		{Address: "10.0.0.4", Port: 80, Priority: 20, Weight: 4},
	}}},
	{name: "localities", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.1.0.1", Port: 80, Locality: sources.Locality{Region: "us", Zone: "us-1a"}},
		{Address: "10.0.0.2", Port: 80, Weight: 2, Locality: sources.Locality{Region: "eu", Zone: "eu-1b", SubZone: "rack2"}},
		{Address: "10.0.0.1", Port: 80, Weight: 3, Locality: sources.Locality{Region: "eu", Zone: "eu-1a"}},
		{Address: "10.0.0.3", Port: 80, Weight: 4, Locality: sources.Locality{Region: "eu", Zone: "eu-1a"}},
		{Address: "10.2.0.1", Port: 80},
		{Address: "10.1.0.2", Port: 80, Priority: 1, Locality: sources.Locality{Region: "us", Zone: "us-1a"}},
	}}},
	{name: "health", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 80, Health: sources.HealthUnknown},
		{Address: "10.0.0.2", Port: 80, Health: sources.HealthHealthy},
		{Address: "10.0.0.3", Port: 80, Health: sources.HealthUnhealthy},
		{Address: "10.0.0.4", Port: 80, Health: sources.HealthDegraded},
		{Address: "10.0.0.5", Port: 80, Health: sources.HealthDraining},
	}}},
	{name: "metadata", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 80, Metadata: map[string]string{"version": "v1", "canary": "false", "az": "eu-1a"}},
		{Address: "10.0.0.2", Port: 80, Metadata: map[string]string{"version": "v2"}},
		{Address: "10.0.0.3", Port: 80, Metadata: map[string]string{}},
	}}},
	{name: "ipv6", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "2001:db8::2", Port: 443, Health: sources.HealthHealthy},
		{Address: "::1", Port: 8443, Health: sources.HealthHealthy},
		{Address: "10.0.0.1", Port: 443, Health: sources.HealthHealthy},
	}}},
	{name: "duplicates", svc: sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 80, Priority: 5},
		{Address: "10.0.0.2", Port: 80, Priority: 5},
		{Address: "10.0.0.1", Port: 80, Priority: 1, Weight: 7},
		{Address: "10.0.0.1", Port: 81, Priority: 1},
	}}},
	{name: "empty", svc: sources.Service{Name: "web"}},
	{name: "timeout", svc: sources.Service{Name: "web"}, opts: Options{ConnectTimeout: 1500 * time.Millisecond}},
	{name: "grpc", svc: sources.Service{Name: "greeter", Endpoints: []sources.Endpoint{
		{Address: "127.0.0.1", Port: 50051, Health: sources.HealthHealthy},
		{Address: "127.0.0.1", Port: 50052, Health: sources.HealthHealthy},
	}}, opts: Options{GRPC: true}},
}

func TestGolden(t *testing.T) {
	for _, tc := range append(goldenCases, shapedCases(t)...) {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Service(tc.svc, tc.opts)
			if err != nil {
				t.Fatalf("Service: %v", err)
			}
			golden.Check(t, filepath.Join("testdata", tc.name+".golden"), render(t, r))
		})
	}
}

// render prints r as indented JSON. protojson deliberately varies its
// whitespace between runs, so its output is re-indented by encoding/json,
// which also keeps the field order protojson chose (declaration order).
func render(t *testing.T, r Resources) []byte {
	t.Helper()
	doc := struct {
		Cluster     json.RawMessage `json:"cluster"`
		GRPCCluster json.RawMessage `json:"grpc_cluster,omitempty"`
		Assignment  json.RawMessage `json:"assignment"`
		Listener    json.RawMessage `json:"listener,omitempty"`
		Route       json.RawMessage `json:"route,omitempty"`
	}{
		Cluster:    protoJSON(t, r.Cluster),
		Assignment: protoJSON(t, r.Assignment),
	}
	if r.GRPCCluster != nil {
		doc.GRPCCluster = protoJSON(t, r.GRPCCluster)
	}
	if r.Listener != nil {
		doc.Listener = protoJSON(t, r.Listener)
	}
	if r.Route != nil {
		doc.Route = protoJSON(t, r.Route)
	}
	compact, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

func protoJSON(t *testing.T, m proto.Message) json.RawMessage {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatalf("marshalling %T: %v", m, err)
	}
	return b
}
