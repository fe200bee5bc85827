package bridge

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/xds"
)

// recorder is an applier that keeps every Apply.
type recorder struct {
	calls []applied
}

type applied struct {
	upserts  []xds.Resource
	removals []xds.Key
}

func (r *recorder) Apply(upserts []xds.Resource, removals []xds.Key) {
	r.calls = append(r.calls, applied{upserts, removals})
}

func service(name string, addrs ...string) sources.Service {
	s := sources.Service{Name: name}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, sources.Endpoint{Address: a, Port: 80, Health: sources.HealthHealthy})
	}
	return s
}

// names renders resources or keys as "type-suffix/name" for comparison.
func names[T xds.Resource | xds.Key](items []T) []string {
	var out []string
	for _, it := range items {
		var typ, name string
		switch v := any(it).(type) {
		case xds.Resource:
			typ, name = v.Type, v.Name
			if v.GRPCOnly {
				name += "(grpc)"
			}
		case xds.Key:
			typ, name = v.Type, v.Name
		}
		short := map[string]string{resource.ClusterType: "cds", resource.EndpointType: "eds",
			resource.ListenerType: "lds", resource.RouteType: "rds", resource.SecretType: "sds"}[typ]
		out = append(out, short+"/"+name)
	}
	slices.Sort(out)
	return out
}

func TestPublisher(t *testing.T) {
	type step struct {
		changes      manager.Changes
		wantUpserts  []string
		wantRemovals []string
		wantErrors   float64
		wantServices float64
	}
	cases := []struct {
		name  string
		grpc  bool
		steps []step
	}{
		{name: "grpc chain", grpc: true, steps: []step{
			{changes: manager.Changes{Upserted: []sources.Service{service("a", "10.0.0.1")}},
				wantUpserts:  []string{"cds/a", "eds/a", "lds/a(grpc)", "rds/a(grpc)"},
				wantServices: 1},
			{changes: manager.Changes{Removed: []string{"a"}},
				wantRemovals: []string{"cds/a", "eds/a", "lds/a", "rds/a"}},
		}},
		{name: "empty first publish still applies", steps: []step{
			{changes: manager.Changes{}},
		}},
		{name: "translation error keeps the last good resources", steps: []step{
			{changes: manager.Changes{Upserted: []sources.Service{service("a", "10.0.0.1"), service("b", "10.0.0.2")}},
				wantUpserts: []string{"cds/a", "cds/b", "eds/a", "eds/b"}, wantServices: 2},
			// b's new version cannot be translated (not an IP): nothing of b
			// is upserted or removed, and a's change goes through.
			{changes: manager.Changes{Upserted: []sources.Service{service("a", "10.0.0.3"), service("b", "b.example")}},
				wantUpserts: []string{"cds/a", "eds/a"}, wantErrors: 1, wantServices: 2},
			{changes: manager.Changes{Removed: []string{"b"}},
				wantRemovals: []string{"cds/b", "eds/b"}, wantErrors: 1, wantServices: 1},
		}},
		{name: "a service never served is not removed", steps: []step{
			{changes: manager.Changes{Upserted: []sources.Service{service("bad", "bad.example")}},
				wantErrors: 1},
			{changes: manager.Changes{Removed: []string{"bad"}}, wantErrors: 1},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			p := newPublisher(rec, c.grpc, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
			for i, s := range c.steps {
				p.publish(s.changes)
				if len(rec.calls) != i+1 {
					t.Fatalf("step %d: %d Apply calls, want %d", i, len(rec.calls), i+1)
				}
				got := rec.calls[i]
				if u := names(got.upserts); !slices.Equal(u, s.wantUpserts) {
					t.Errorf("step %d: upserts %v, want %v", i, u, s.wantUpserts)
				}
				if r := names(got.removals); !slices.Equal(r, s.wantRemovals) {
					t.Errorf("step %d: removals %v, want %v", i, r, s.wantRemovals)
				}
				for _, u := range got.upserts {
					if u.Message == nil {
						t.Errorf("step %d: %s/%s has no message", i, u.Type, u.Name)
					}
				}
				if e := value(t, p.errors); e != s.wantErrors {
					t.Errorf("step %d: translate errors = %v, want %v", i, e, s.wantErrors)
				}
				if n := value(t, p.services); n != s.wantServices {
					t.Errorf("step %d: services = %v, want %v", i, n, s.wantServices)
				}
			}
		})
	}
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}

// TestPublisherBatchesOnTheEngine: on the engine, a publish goes through
// an xds.Batch, which marshals each service's resources as they are
// translated instead of holding every message of a large change at once;
// an applier without Batch (a dry run's collector) gets the same
// resources in one Apply.
func TestPublisherBatchesOnTheEngine(t *testing.T) {
	srv := xds.NewServer(xds.Options{})
	p := newPublisher(srv, true, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if newChange(p.server).b == nil {
		t.Fatal("the publisher does not batch on the engine")
	}
	p.publish(manager.Changes{Upserted: []sources.Service{service("a", "10.0.0.1"), service("b", "10.0.0.2")}})
	if got := srv.Resources(); got != 8 {
		t.Fatalf("the engine serves %d resources, want 8 (a cluster, an assignment, a listener and a route each)", got)
	}
	c := &collector{}
	newPublisher(c, true, slog.New(slog.DiscardHandler), prometheus.NewRegistry()).
		publish(manager.Changes{Upserted: []sources.Service{service("a", "10.0.0.1"), service("b", "10.0.0.2")}})
	if len(c.upserts) != 8 {
		t.Fatalf("the collector got %d resources, want 8", len(c.upserts))
	}
}
