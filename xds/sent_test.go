package xds

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// heldType is a type of n slots, each with a current entry, its chunk
// table published.
func heldType(n int) *typeState {
	t := &typeState{slotStore: slotStore{slots: map[string]*slot{}}}
	for i := range n {
		sl := t.get(fmt.Sprintf("r%d", i))
		sl.cur = &entry{name: sl.name, version: "1"}
		t.touchChunk(sl.idx)
	}
	t.publishChunks()
	return t
}

// change gives slot i a new current entry and publishes it.
func (t *typeState) change(i int, version string) *entry {
	sl := t.byIdx.at(i)
	sl.cur = &entry{name: sl.name, version: version}
	t.touchChunk(i)
	t.publishChunks()
	return sl.cur
}

// A watch that holds what the type holds keeps no chunk of its own, in any
// order of filling; a change makes one chunk its own until the watch is sent
// it, and the type's chunks are never written.
func TestHeldSetSharesTheTypesChunks(t *testing.T) {
	const n = 1000
	ts := heldType(n)
	own := func(h *sentSet) (k int) {
		for i, c := range h.dense {
			if c != ts.chunk(i) {
				k++
			}
		}
		return k
	}
	for _, order := range []string{"index", "random"} {
		h := &sentSet{t: ts}
		h.reserveDense(n)
		idx := rand.Perm(n)
		if order == "index" {
			for i := range idx {
				idx[i] = i
			}
		}
		for _, i := range idx {
			h.put(ts.byIdx.at(i), ts.byIdx.at(i).cur)
		}
		if k := own(h); k != 0 || h.len() != n {
			t.Fatalf("%s order: %d chunks of its own, %d held; want 0 and %d", order, k, h.len(), n)
		}
	}

	h := &sentSet{t: ts}
	h.reserveDense(n)
	for _, sl := range ts.byIdx.all() {
		h.put(sl, sl.cur)
	}
	was := ts.byIdx.at(70).cur
	shared := ts.chunk(1)
	e := ts.change(70, "2")
	if own(h) != 1 || shared.e[70-chunkLen] != was {
		t.Fatalf("after a change: %d chunks of its own (want 1), old chunk written: %v", own(h), shared.e[70-chunkLen] != was)
	}
	h.put(ts.byIdx.at(70), e)
	if own(h) != 0 {
		t.Fatalf("sent the change: %d chunks of its own, want 0", own(h))
	}
	h.put(ts.byIdx.at(3), stale)
	if got, _ := h.get(ts.byIdx.at(3)); got != stale || own(h) != 1 || ts.chunk(0).e[3] == stale {
		t.Fatalf("a write of its own: got %v, %d own chunks, table written %v", got, own(h), ts.chunk(0).e[3] == stale)
	}
}

// The dense form behaves as the map it replaces, whatever the type's table
// does meanwhile: a random sequence of puts, deletes and type changes,
// checked against a map.
func TestHeldSetDenseMatchesAMap(t *testing.T) {
	const n = 300
	ts := heldType(n)
	rng := rand.New(rand.NewPCG(1, 2))
	h := &sentSet{t: ts}
	h.reserveDense(n)
	model := map[*slot]*entry{}
	var tables []map[*sentChunk][chunkLen]*entry // each published chunk's content when published
	snap := func() {
		m := map[*sentChunk][chunkLen]*entry{}
		for k := range (n + chunkLen - 1) / chunkLen {
			if c := ts.chunk(k); c != nil {
				m[c] = c.e
			}
		}
		tables = append(tables, m)
	}
	snap()
	for step := range 20000 {
		sl := ts.byIdx.at(rng.IntN(n))
		switch op := rng.IntN(10); {
		case op < 5:
			h.put(sl, sl.cur)
			model[sl] = sl.cur
		case op < 6:
			h.put(sl, nil)
			model[sl] = nil
		case op < 8:
			h.del(sl)
			delete(model, sl)
		case op < 9:
			ts.change(sl.idx, fmt.Sprint(step))
			snap()
		default:
			sl.cur = nil // a removal
			ts.touchChunk(sl.idx)
			ts.publishChunks()
			snap()
		}
	}
	if h.len() != len(model) {
		t.Fatalf("len %d, want %d", h.len(), len(model))
	}
	for _, sl := range ts.byIdx.all() {
		got, ok := h.get(sl)
		want, wok := model[sl]
		if got != want || ok != wok {
			t.Fatalf("slot %d: got %v %v, want %v %v", sl.idx, got, ok, want, wok)
		}
	}
	seen := 0
	for sl, e := range h.all() {
		if want, ok := model[sl]; !ok || want != e {
			t.Fatalf("all yields slot %d with %v, model has %v %v", sl.idx, e, want, ok)
		}
		seen++
	}
	entries := 0
	for range h.entries() {
		entries++
	}
	withEntry := 0
	for _, e := range model {
		if e != nil {
			withEntry++
		}
	}
	if seen != len(model) || entries != withEntry {
		t.Fatalf("all yields %d, entries %d; want %d and %d", seen, entries, len(model), withEntry)
	}
	for _, m := range tables {
		for c, e := range m {
			if c.e != e {
				t.Fatal("a published chunk was written")
			}
		}
	}
}

// Through the server: a delta client sent a change holds the type's chunks
// again, none of its own.
func TestHeldSetSharedAfterAChange(t *testing.T) {
	s := NewServer(Options{})
	s.Apply(services(200), nil)
	c, _ := s.connect(context.Background(), "delta_ads", true)
	defer s.disconnect(c)
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: ClusterType, ResourceNamesSubscribe: []string{"*"}}, nil)
	drain := func() (n int) {
		for owed(c) != nil {
			n++
		}
		return n
	}
	if drain() == 0 {
		t.Fatal("no initial state sent")
	}
	s.Apply([]Resource{cluster(svcName(3), 7*time.Second)}, nil)
	if drain() == 0 {
		t.Fatal("the change was not sent")
	}
	ts, w := s.types[ClusterType], c.watches[ClusterType]
	for k, hc := range w.sent.dense {
		if hc != ts.chunk(k) {
			t.Fatalf("chunk %d of %d is the client's own after the change was sent", k, len(w.sent.dense))
		}
	}
}
