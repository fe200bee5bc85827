package xds

import (
	"context"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// TestBulkSubscriptionScan drives a delta watch whose subscription is
// answered by a scan (scan.go), with responses split small, while changes
// land before and during the scan: every name arrives, none twice in one
// response, and the last version each name receives is its current one.
func TestBulkSubscriptionScan(t *testing.T) {
	const n = 300
	tests := []struct {
		name string
		sotw bool
		typ  string
		sub  []string
		// before lands after the subscription, before the first push;
		// during, after the first response.
		before, during []Resource
		removed        []Key // with during
	}{
		{name: "explicit names", typ: EndpointType, sub: manyNames(n)},
		{name: "change before the first push", typ: EndpointType, sub: manyNames(n),
			before: []Resource{assignment("svc-5", 2), assignment("svc-250", 2)}},
		{name: "changes during the scan", typ: EndpointType, sub: manyNames(n),
			during:  []Resource{assignment("svc-1", 3), assignment("svc-290", 3), assignment("svc-new", 1)},
			removed: []Key{{EndpointType, "svc-280"}, {EndpointType, "svc-0"}}},
		{name: "sotw names", sotw: true, typ: EndpointType, sub: manyNames(n),
			during: []Resource{assignment("svc-1", 3), assignment("svc-290", 3)}},
		{name: "wildcard", typ: ClusterType, sub: []string{"*"},
			during:  []Resource{cluster("svc-2", 2*time.Second), cluster("svc-299", 2*time.Second), cluster("svc-new", time.Second)},
			removed: []Key{{ClusterType, "svc-150"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(Options{MaxResponseBytes: 2048})
			s.Apply(services(n), nil)
			variant := "delta_ads"
			if tt.sotw {
				variant = "sotw_ads"
			}
			c, r := s.connect(context.Background(), variant, !tt.sotw)
			if r != nil {
				t.Fatal(r)
			}
			defer s.disconnect(c)
			if tt.sotw {
				c.onSotW("", &discoveryv3.DiscoveryRequest{TypeUrl: tt.typ, ResourceNames: tt.sub})
			} else {
				c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: tt.typ, ResourceNamesSubscribe: tt.sub}, nil)
			}
			if w := c.watches[tt.typ]; w.scan == nil {
				t.Fatal("the subscription queued no scan")
			}
			s.Apply(tt.before, nil)

			got := map[string]string{} // name → last version received
			removed := map[string]bool{}
			responses, joined := 0, 0
			take := func() bool {
				o := owed(c)
				if o == nil {
					return false
				}
				responses++
				list, removedNames, runs := wireOf(t, o.msg)
				joined += runs
				seen := map[string]bool{}
				for _, e := range list {
					if seen[e.name] {
						t.Fatalf("response %d carries %s twice", responses, e.name)
					}
					seen[e.name] = true
					got[e.name] = e.version
				}
				for _, name := range removedNames {
					removed[name] = true
					delete(got, name)
				}
				return true
			}
			if !take() {
				t.Fatal("no first response")
			}
			// Removed names are told if the client holds them, and a delta
			// client subscribed by name is told either way: the removal
			// answers its subscription.
			held := map[string]bool{}
			for _, k := range tt.removed {
				held[k.Name] = got[k.Name] != "" || !tt.sotw && tt.sub[0] != "*"
			}
			s.Apply(tt.during, tt.removed)
			for take() {
			}
			if responses < 3 {
				t.Fatalf("%d responses: the limit did not split the scan", responses)
			}
			if joined == 0 {
				t.Fatal("no run of records was sent as one buffer")
			}
			want := map[string]string{}
			s.mu.Lock()
			for _, sl := range s.types[tt.typ].byIdx.all() {
				if sl != nil && sl.cur != nil {
					want[sl.name] = sl.cur.version
				}
			}
			s.mu.Unlock()
			if tt.typ == EndpointType {
				delete(want, "svc-new") // not subscribed
			}
			for name, v := range want {
				if got[name] != v {
					t.Errorf("%s: last received %q, current %q", name, got[name], v)
				}
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("%s received but not current", name)
				}
			}
			for _, k := range tt.removed {
				if removed[k.Name] != held[k.Name] {
					t.Errorf("%s: held %v, removal sent %v", k.Name, held[k.Name], removed[k.Name])
				}
			}
		})
	}
}

// wireOf checks that msg's buffers decode to the message it stands for and
// returns its entries, its removed names and how many runs of records it
// sends as one buffer.
func wireOf(t *testing.T, msg wire.Msg) (list []*entry, removed []string, runs int) {
	t.Helper()
	var raw []byte
	for _, b := range msg.Buffers() {
		raw = append(raw, b.ReadOnlyData()...)
	}
	var want, got proto.Message
	switch m := msg.(type) {
	case *deltaMsg:
		want, got = m.proto(), &discoveryv3.DeltaDiscoveryResponse{}
		list, removed, runs = m.list, m.removed, len(m.runs)
	case *sotwMsg:
		want, got = m.proto(), &discoveryv3.DiscoveryResponse{}
		list, runs = m.entries(), len(m.runs)
	}
	if err := proto.Unmarshal(raw, got); err != nil || !proto.Equal(got, want) {
		t.Fatalf("buffers decode to %v (%v), want %v", got, err, want)
	}
	return list, removed, runs
}
