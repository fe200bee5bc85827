package xds

import (
	"maps"
	"runtime"
	"testing"
	"time"
	"weak"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// TestLookupSharedList: a shared name list is looked up once, creates no
// slot, and is looked up again once a slot of the type was released, so a
// name whose slot was released and created again gets the new slot.
func TestLookupSharedList(t *testing.T) {
	ts := newTypeState(EndpointType, nil)
	names := []string{"a", "b", "c"}
	defer wire.Share(names)()

	if got := ts.lookup(names); got != nil || len(ts.slots) != 0 {
		t.Fatalf("lookup of names without slots: %v, %d slots created; want nil, none", got, len(ts.slots))
	}
	for _, n := range names {
		ts.get(n)
	}
	first := ts.lookup(names)
	for i, n := range names {
		if first[i] != ts.slots[n] {
			t.Fatalf("slot %d is not %q's", i, n)
		}
	}
	if again := ts.lookup(names); &again[0] != &first[0] {
		t.Error("the same shared list was looked up again")
	}
	if unshared := append([]string(nil), names...); ts.lookup(unshared) != nil {
		t.Error("a list the codec did not share was answered; only shared lists are")
	}

	old := ts.slots["b"]
	ts.release(old) // nobody subscribes to it, it never had an entry
	if got := ts.lookup(names); got != nil {
		t.Fatalf("after b's slot was released: %v, want nil (b has no slot)", got)
	}
	renewed := ts.get("b")
	if got := ts.lookup(names); got == nil || got[1] != renewed || got[1] == old {
		t.Fatalf("after b's slot was created again: %v, want its new slot", got)
	}
}

// TestBatchKeepsNoMessage: a Batch keeps an upserted resource's encoding,
// not its messages, so a caller that makes resources as it goes holds
// one at a time; applied, the batch serves what Apply would.
func TestBatchKeepsNoMessage(t *testing.T) {
	s := NewServer(Options{})
	s.Apply([]Resource{cluster("x", time.Second)}, nil)
	b := s.Batch()
	var gone []weak.Pointer[clusterv3.Cluster]
	for _, name := range []string{"a", "b", "c"} {
		r := cluster(name, time.Second)
		gone = append(gone, weak.Make(r.Message.(*clusterv3.Cluster)))
		b.Upsert(r)
	}
	b.Remove(Key{ClusterType, "x"})
	runtime.GC()
	for i, p := range gone {
		if p.Value() != nil {
			t.Fatalf("the batch keeps the message of upsert %d", i)
		}
	}
	if live(s, ClusterType) != 1 {
		t.Fatal("a batch changed the store before it was applied")
	}
	b.Apply()
	s.mu.Lock()
	defer s.mu.Unlock()
	got := map[string]bool{}
	for _, sl := range s.types[ClusterType].byIdx.all() {
		got[sl.name] = sl.cur != nil
	}
	if !maps.Equal(got, map[string]bool{"a": true, "b": true, "c": true}) {
		t.Fatalf("served %v, want a, b and c", got)
	}
}
