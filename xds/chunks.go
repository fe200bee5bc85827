package xds

import (
	"math/bits"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/mem"
)

const (
	chunkBits = 6
	chunkLen  = 1 << chunkBits
)

// sentChunk is the sent entries of chunkLen consecutive slots: nil = absent,
// none = present without an entry. A shared chunk belongs to a type's chunk
// table and is never written again.
type sentChunk struct {
	e      [chunkLen]*entry
	shared bool
	// Set on a type's table chunks only, when published. plain: none of
	// its entries is gRPC-only or has a gRPC variant, so a client not
	// served a Rewrite is sent the entries themselves. mask: bit j set
	// where it has an entry. none: its twin, present without an entry
	// wherever it has one, which a watch subscribing to all of the chunk
	// holds until the entries are sent (see scan.go).
	plain bool
	mask  uint64
	none  *sentChunk
	// recs are the chunk's SotW records, built on first use (records).
	recs atomic.Pointer[chunkRecords]
}

// none marks a present slot without an entry in dense mode.
var none = &entry{}

// at is the entry at j of a chunk, nil for a nil chunk.
func (c *sentChunk) at(j int) *entry {
	if c == nil {
		return nil
	}
	return c.e[j]
}

// equalBut reports whether c and d (either nil for all absent) hold the
// same at every index but j. It compares from j+1 onwards, wrapping round:
// a chunk being filled in index order differs right there, so the common
// case stops at the first comparison.
func (c *sentChunk) equalBut(d *sentChunk, j int) bool {
	if c == d {
		return true
	}
	for n := 1; n < chunkLen; n++ {
		i := (j + n) & (chunkLen - 1)
		if c.at(i) != d.at(i) {
			return false
		}
	}
	return true
}

// scopeTables are the published tables of the scopes, by scope ID (index
// 0 unused: the type's own table), with the number of entries in each.
type scopeTables struct {
	chunks [][]*sentChunk
	count  []int
}

// resized is a copy of tab with n chunks.
func resized(tab []*sentChunk, n int) []*sentChunk {
	tab = slices.Clone(tab)
	if n > len(tab) {
		return append(tab, make([]*sentChunk, n-len(tab))...)
	}
	clear(tab[n:])
	return tab[:n]
}

// count is the number of entries of a table chunk (nil: none).
func (c *sentChunk) count() int {
	if c == nil {
		return 0
	}
	return bits.OnesCount64(c.mask)
}

// A full-state SotW response (CDS, LDS, a collection) lists everything the
// client holds, so a push of one changed resource would otherwise walk,
// size and hand gRPC every record of the type, for every client: at 10,000
// resources that walk is most of what the push costs. A watch that is up to
// date holds the type's shared chunks (see sentChunk), immutable and the same for
// every such client, and an Apply replaces only the chunks it touched. So a
// shared chunk's records are concatenated once, on first use, and a
// full-state response is the sent set a chunk at a time: a shared chunk as
// one buffer, the entries of a chunk of the watch's own one by one. The
// bytes are those of the entry-by-entry form, in the same order.

// chunkRecords are a shared chunk's SotW records back to back, in slot
// order, with the number of entries and the size of their messages.
type chunkRecords struct {
	buf  mem.Buffer
	n    int
	size int // sum of entry.size
}

// records returns c's records, concatenating them on first use. c must be
// shared: a shared chunk is never written again. Safe from any writer.
func (c *sentChunk) records() *chunkRecords {
	if r := c.recs.Load(); r != nil {
		return r
	}
	n := 0
	for _, e := range c.e {
		if e != nil && e != none {
			n += e.recLen(false)
		}
	}
	r, b := &chunkRecords{}, make([]byte, 0, n)
	for _, e := range c.e {
		if e != nil && e != none {
			b = append(b, e.record(false).ReadOnlyData()...)
			r.n++
			r.size += e.size
		}
	}
	r.buf = mem.SliceBuffer(b)
	if !c.recs.CompareAndSwap(nil, r) {
		return c.recs.Load()
	}
	return r
}
