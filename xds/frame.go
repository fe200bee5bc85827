package xds

import "github.com/xdsbridge/xdsbridge/xds/wire"

// frame is a type's resources with an entry at one moment: slots[i] had
// entries[i]. Built under Server.mu, then read-only, so writers read it
// holding only client.mu.
type frame struct {
	slots   []*slot
	entries []*entry
	recs    [2]wire.Records // SotW, delta; built on first use
	// tab is the type's chunk table when the frame was taken: chunk k
	// holds the frame's entries of slots k*chunkLen on. starts are the
	// positions in slots where a chunk begins.
	tab    []*sentChunk
	starts []int
}

// records returns the frame's records of one form, concatenating them on
// first use (safe from any writer).
func (f *frame) records(delta bool) *wire.Records {
	r := &f.recs[0]
	if delta {
		r = &f.recs[1]
	}
	r.Once.Do(func() {
		n := 0
		for _, e := range f.entries {
			n += e.recLen(delta)
		}
		r.Buf, r.Off = make([]byte, 0, n), make([]int, 0, len(f.entries)+1)
		for _, e := range f.entries {
			r.Off = append(r.Off, len(r.Buf))
			r.Buf = append(r.Buf, e.record(delta).ReadOnlyData()...)
		}
		r.Off = append(r.Off, len(r.Buf))
	})
	return r
}
