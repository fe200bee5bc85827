package xds

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// typeState is the store of one type. Its state is split by owner, each
// part a value inside it:
//
//   - slotStore: its slots, by name and by index (store.go);
//   - chunkTables: its current entries as published chunk tables, and
//     frames (tables.go);
//   - watchIndex: the watches of the type, by index and the wildcards by
//     scope (subscribers.go).
//
// url, rank, brk, full and m are set when the store is made and
// read-only after; the parts are guarded by Server.mu but where their
// comments say otherwise.
type typeState struct {
	url  string
	rank int
	brk  int // breakRank
	// full: SotW serves the type as a whole collection (fullState), like
	// CDS and LDS.
	full bool
	m    *typeMetrics
	slotStore
	chunkTables
	watchIndex
}

// slotStore is a type's slots: by name (slots) and by dense index (byIdx),
// guarded by Server.mu. Writers, which hold only client.mu, read count,
// the size of byIdx, and index, which maps names to slots like slots; it
// is kept for the cluster and assignment stores only (indexed), which the
// make-before-break gate reads.
type slotStore struct {
	slots map[string]*slot
	byIdx slotTable
	count atomic.Int64 // byIdx.span(), readable by writers without Server.mu
	peak  int          // most slots since the slot map was last made
	// looked is the last shared name list looked up and its slots (see
	// lookup), dropped when a slot is released.
	looked  lookedUp
	indexed bool
	index   sync.Map
}

// chunkTables are a type's current entries in immutable chunks, by slot
// index (chunks.go), published for writers, which read them without
// Server.mu: table is the type's, scoped the same per scope. The rest is
// guarded by Server.mu: touched are the chunks changed since they were
// published, seen the scopes any entry of the type was ever in or denied
// to (those that have tables), and cachedFrames the frames of the current
// entries (frame.go) by scope ID, nil after a change until a scan asks
// for one. Its methods, and the typeState methods that build the
// tables from the slots, are in tables.go.
type chunkTables struct {
	table        atomic.Pointer[[]*sentChunk]
	scoped       atomic.Pointer[scopeTables]
	touched      []int
	seen         ScopeSet
	cachedFrames []*frame
}

type lookedUp struct {
	first *string // &names[0]: keeps the list, so its address is not reused
	slots []*slot
}

// lookup returns the slots of names, a list shared by the codec (wire.IsShared),
// when every name has one; nil for any other list, or when a name has no
// slot ("*" has none). It creates no slot. Every client of a homogeneous
// fleet sends the same list of every cluster in its first EDS request, and
// looking up every name of it in the slot map for each client would be a
// good share of the server's CPU in a cold start; a shared list is
// immutable, so its slots are looked up once and kept until a slot of the
// type is released, the only way a name's slot changes. The answer is
// read-only. Server.mu held.
func (t *slotStore) lookup(names []string) []*slot {
	if !wire.IsShared(names) {
		return nil
	}
	if l := t.looked; len(l.slots) == len(names) && l.first == &names[0] {
		return l.slots
	}
	slots := make([]*slot, len(names))
	for i, n := range names {
		if slots[i] = t.slots[n]; slots[i] == nil {
			return nil
		}
	}
	t.looked = lookedUp{first: &names[0], slots: slots}
	return slots
}

// slotOf is the slot of names[i], from slots (lookup's answer) if not nil,
// else found or created. Server.mu held.
func (t *slotStore) slotOf(slots []*slot, names []string, i int) *slot {
	if slots != nil {
		return slots[i]
	}
	return t.get(names[i])
}

func (t *slotStore) get(name string) *slot {
	sl := t.slots[name]
	if sl == nil {
		// A copy: a request's names may share one buffer (see Codec).
		sl = &slot{name: strings.Clone(name)}
		t.byIdx.take(sl)
		t.count.Store(int64(t.byIdx.span()))
		t.slots[name] = sl
		t.peak = max(t.peak, len(t.slots))
		if t.indexed {
			t.index.Store(sl.name, sl)
		}
	}
	return sl
}

// release drops sl if nothing references it (see slot): no entry, no
// subscriber, pin or owed removal. Server.mu held.
func (t *slotStore) release(sl *slot) {
	if sl.cur == nil && sl.pins == 0 && sl.owed.Load() == 0 && sl.subs.len() == 0 && t.slots[sl.name] == sl {
		delete(t.slots, sl.name)
		if t.indexed {
			t.index.CompareAndDelete(sl.name, sl)
		}
		t.looked = lookedUp{}
		t.byIdx.free(sl)
		t.count.Store(int64(t.byIdx.span()))
		t.shrink()
	}
}

// shrink makes the slot map again once it is at most a quarter full: Go
// maps never shrink, and without it a client that subscribed to many
// invented names, or a registry that shrank, would leave their memory
// behind. It costs O(live slots) once per halving or so; the slot table
// shrinks by itself (slotTable.free). Server.mu held.
func (t *slotStore) shrink() {
	const small = 1024
	if live := len(t.slots); t.peak > small && live < t.peak/4 {
		m := make(map[string]*slot, live)
		maps.Copy(m, t.slots)
		t.slots, t.peak = m, live
	}
}

// total is the size of the type's slot table, for sentSet's dense form.
func (t *slotStore) total() int { return int(t.count.Load()) }

func newTypeState(url string, m *typeMetrics) *typeState {
	return &typeState{
		url:        url,
		rank:       rank(url),
		brk:        breakRank(url),
		full:       fullState(url),
		m:          m,
		slotStore:  slotStore{slots: make(map[string]*slot), indexed: indexed(url)},
		watchIndex: watchIndex{wild: make(map[int]map[*watch]struct{})},
	}
}
