package xds

import (
	"iter"
	"math/bits"
	"slices"
)

// slotTable numbers a type's slots densely (slot.idx) and finds a slot by
// its index. Indexes are what sent sets, the chunk tables and frames are
// laid out by, so a slot keeps its index for life and the indexes in use
// can be spread over the whole range a type once reached: a registry that
// shrank from 100,000 services to 6 may keep one of the six at index
// 99,999. The table's memory must follow the slots in use, not that
// range, so it is paged: a page is chunkLen slots (a sent set's and a
// chunk table's chunk), made when a slot of it is taken and dropped when
// its last slot is freed. What stays for the range is a pointer and a bit
// per page: 64 times less than a pointer per index.
//
// A new slot takes the lowest free index, so a table that shrank fills
// from the bottom, its upper pages stay empty and the range comes down
// once the high slots go. Guarded by Server.mu.
type slotTable struct {
	pages []*slotPage // by idx>>chunkBits; nil = every slot of the page free
	// open has bit k set for each page k below len(pages) with a free
	// index (nil or not full); words below openFrom are all zero.
	open     []uint64
	openFrom int
	// end is one past the highest index in use (0: none).
	end int
}

// slotPage is the slots of chunkLen consecutive indexes.
type slotPage struct {
	s    [chunkLen]*slot
	used uint64 // bit j set where s[j] is in use
}

// smallTable is the page count under which the table's arrays are not
// reallocated smaller: a few hundred bytes are not worth the copy.
const smallTable = 64

// span is one past the highest index in use: the extent sent sets and
// chunk tables are sized by.
func (t *slotTable) span() int { return t.end }

// at returns the slot at index i, nil if the index is free.
func (t *slotTable) at(i int) *slot {
	k := i >> chunkBits
	if i < 0 || k >= len(t.pages) || t.pages[k] == nil {
		return nil
	}
	return t.pages[k].s[i&(chunkLen-1)]
}

// page returns the slots of page k (chunk k of sent sets), nil when all
// of them are free. The answer must not be written to.
func (t *slotTable) page(k int) *[chunkLen]*slot {
	if k >= len(t.pages) || t.pages[k] == nil {
		return nil
	}
	return &t.pages[k].s
}

// all yields the slots in use with their indexes, in index order. A slot
// freed meanwhile is not yielded unless it was already; one taken
// meanwhile may be or not.
func (t *slotTable) all() iter.Seq2[int, *slot] {
	return func(yield func(int, *slot) bool) {
		for k, p := range t.pages {
			if p == nil {
				continue
			}
			for m := p.used; m != 0; m &= m - 1 {
				j := bits.TrailingZeros64(m)
				if sl := p.s[j]; sl != nil && !yield(k<<chunkBits|j, sl) {
					return
				}
			}
		}
	}
}

// take gives sl the lowest free index and stores it there.
func (t *slotTable) take(sl *slot) {
	k := len(t.pages)
	for w := t.openFrom; w < len(t.open); w++ {
		if t.open[w] != 0 {
			t.openFrom = w
			k = w<<6 | bits.TrailingZeros64(t.open[w])
			break
		}
	}
	if k == len(t.pages) {
		t.pages = append(t.pages, nil)
		if k>>6 >= len(t.open) {
			t.open = append(t.open, 0)
		}
		t.open[k>>6] |= 1 << (k & 63)
		t.openFrom = k >> 6
	}
	p := t.pages[k]
	if p == nil {
		p = &slotPage{}
		t.pages[k] = p
	}
	j := bits.TrailingZeros64(^p.used)
	p.s[j], p.used = sl, p.used|1<<j
	if p.used == ^uint64(0) {
		t.open[k>>6] &^= 1 << (k & 63)
	}
	sl.idx = k<<chunkBits | j
	t.end = max(t.end, sl.idx+1)
}

// free frees sl's index. Once the slots in use fill at most a quarter of
// the pages' array, the arrays are made again at their length: the cost
// is O(pages) once per halving or so.
func (t *slotTable) free(sl *slot) {
	k, j := sl.idx>>chunkBits, sl.idx&(chunkLen-1)
	p := t.pages[k]
	p.s[j], p.used = nil, p.used&^(1<<j)
	t.open[k>>6] |= 1 << (k & 63)
	t.openFrom = min(t.openFrom, k>>6)
	if p.used != 0 {
		if k == len(t.pages)-1 {
			t.end = t.last()
		}
		return
	}
	t.pages[k] = nil
	n := len(t.pages)
	for n > 0 && t.pages[n-1] == nil {
		n--
	}
	if n == len(t.pages) {
		return
	}
	clear(t.pages[n:])
	t.pages = t.pages[:n]
	w := (n + 63) >> 6
	clear(t.open[w:])
	t.open = t.open[:w]
	if n&63 != 0 {
		t.open[w-1] &= 1<<(n&63) - 1
	}
	t.openFrom = min(t.openFrom, w)
	t.end = t.last()
	if c := cap(t.pages); c > smallTable && n < c/4 {
		t.pages = slices.Clone(t.pages)
		t.open = slices.Clone(t.open)
	}
}

// last is one past the highest index in use, found from the last page,
// which is nil only when the table is empty.
func (t *slotTable) last() int {
	n := len(t.pages)
	if n == 0 {
		return 0
	}
	return n<<chunkBits - bits.LeadingZeros64(t.pages[n-1].used)
}
