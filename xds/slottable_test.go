package xds

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/xdsbridge/xdsbridge/test/heaptest"
)

// TestSlotTableAgainstModel: random takes and frees against a model of the
// indexes in use. A new slot takes the lowest free index, at finds every
// slot, all yields them in order, the span is one past the highest, and
// the table keeps a page only where a slot is in use.
func TestSlotTableAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab slotTable
	model := map[int]*slot{}
	var inUse []*slot
	for step := range 20000 {
		// Grow to a few thousand, shrink to a handful, and again.
		grow := (step/5000)%2 == 0
		if len(inUse) == 0 || (grow && rng.IntN(10) < 8) || (!grow && rng.IntN(10) < 2) {
			lowest := 0
			for model[lowest] != nil {
				lowest++
			}
			sl := &slot{name: fmt.Sprint(step)}
			tab.take(sl)
			if sl.idx != lowest {
				t.Fatalf("step %d: took index %d, want the lowest free, %d", step, sl.idx, lowest)
			}
			model[sl.idx] = sl
			inUse = append(inUse, sl)
		} else {
			i := rng.IntN(len(inUse))
			sl := inUse[i]
			inUse[i] = inUse[len(inUse)-1]
			inUse = inUse[:len(inUse)-1]
			tab.free(sl)
			delete(model, sl.idx)
		}
		if step%97 == 0 || len(inUse) < 3 {
			checkSlotTable(t, step, &tab, model)
		}
	}
	for _, sl := range inUse {
		tab.free(sl)
		delete(model, sl.idx)
	}
	checkSlotTable(t, -1, &tab, model)
	if len(tab.pages) != 0 || cap(tab.pages) > smallTable || len(tab.open) != 0 {
		t.Fatalf("empty table: %d pages (capacity %d), %d open words; want none", len(tab.pages), cap(tab.pages), len(tab.open))
	}
}

func checkSlotTable(t *testing.T, step int, tab *slotTable, model map[int]*slot) {
	t.Helper()
	top, pages := -1, map[int]bool{}
	for i, sl := range model {
		top = max(top, i)
		pages[i>>chunkBits] = true
		if tab.at(i) != sl {
			t.Fatalf("step %d: at(%d) = %v, want %v", step, i, tab.at(i), sl)
		}
	}
	if tab.span() != top+1 {
		t.Fatalf("step %d: span %d, want %d", step, tab.span(), top+1)
	}
	prev, n := -1, 0
	for i, sl := range tab.all() {
		if i <= prev || model[i] != sl || sl.idx != i {
			t.Fatalf("step %d: all yields %v at %d after %d", step, sl, i, prev)
		}
		prev, n = i, n+1
	}
	if n != len(model) {
		t.Fatalf("step %d: all yields %d slots, want %d", step, n, len(model))
	}
	kept := 0
	for _, p := range tab.pages {
		if p != nil {
			kept++
		}
	}
	if kept != len(pages) {
		t.Fatalf("step %d: %d pages kept, want the %d with a slot in use", step, kept, len(pages))
	}
	if want := (tab.span() + chunkLen - 1) / chunkLen; len(tab.pages) != want {
		t.Fatalf("step %d: %d pages for a span of %d, want %d", step, len(tab.pages), tab.span(), want)
	}
}

// TestShrunkStoreKeepsWhatItServes: a type's store that held 100,000 names
// and keeps 6, at the top of its index range (the order names came in
// decides where they sit), retains the 6 slots and a few words per 64
// indexes of the range, not the range's worth of slot pointers and free
// indexes, measured by the live heap. Once the 6 go too, names that come
// back start again at index 0.
func TestShrunkStoreKeepsWhatItServes(t *testing.T) {
	const n, kept = 100000, 6
	before := heaptest.Live()
	ts := newTypeState(EndpointType, nil)
	all := make([]*slot, n)
	for i := range n {
		all[i] = ts.get(fmt.Sprintf("churn-%d", i))
	}
	for _, sl := range all[:n-kept] {
		ts.release(sl)
	}
	all = slices.Clone(all[n-kept:]) // and not the 100,000 released
	got := heaptest.Live() - before
	runtime.KeepAlive(ts)
	// The span is still the 100,000 indexes: a pointer and a bit per page
	// of 64 (12.7 KB), one page of the 6 slots, the slots themselves and
	// a small name map.
	if ts.total() != n {
		t.Fatalf("span %d, want %d", ts.total(), n)
	}
	if got > 128<<10 {
		t.Fatalf("the store of %d names kept %d KB of a shrink from %d, want at most 128 KB", kept, got>>10, n)
	}
	for _, sl := range all {
		ts.release(sl)
	}
	if ts.total() != 0 || cap(ts.byIdx.pages) > smallTable {
		t.Fatalf("empty store: span %d, %d page pointers", ts.total(), cap(ts.byIdx.pages))
	}
	for i := range kept {
		if sl := ts.get(fmt.Sprint("again-", i)); sl.idx != i {
			t.Fatalf("name %d back after the shrink has index %d, want %d", i, sl.idx, i)
		}
	}
}
