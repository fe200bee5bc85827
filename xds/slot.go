package xds

import (
	"sync/atomic"
)

// slot is one resource name of one type: its current entry and the watches
// that subscribed to it by name. All fields but owed are guarded by
// Server.mu.
//
// A slot lives while something references it: an entry, a watch
// subscribed to it by name, a watch that pins it (a name without an entry
// the client asked for), or a watch owed its removal. A slot without any
// is released (slotStore.release), so the store holds what it serves and
// what its clients still reference, never every name it ever served. A
// name that comes back gets a new slot, likely at another index: nothing
// may keep a slot or its index past its release, which is what owed
// guards for the watches that held the entry.
type slot struct {
	name string
	idx  int // dense index within its type, reused after release
	cur  *entry
	subs subscribers
	// owed counts the watches whose pending changes hold this slot's
	// removal (a pend without an entry, watch.mark): their clients hold,
	// or were about to be sent, what the slot had, and their sent sets
	// know the slot by its index until the removal is sent. It grows only
	// under Server.mu and client.mu (mark); a writer decrements it holding
	// client.mu alone, when it sends the removal, and queues the slot for
	// release if it was the last (orphanQueue.add).
	owed atomic.Int32
	// pins counts the watches that reference this slot while it has no
	// entry (a name a client subscribed to or claimed that the server does
	// not have): it stays until the last of them lets go (watch.sweep) or
	// disconnects, and is then released.
	pins int
}

// slotSet is a set of slots of one type, by index.
type slotSet []*slot

func (b slotSet) has(sl *slot) bool { return sl.idx < len(b) && b[sl.idx] == sl }

func (b *slotSet) set(sl *slot) {
	if sl.idx >= len(*b) {
		*b = append(*b, make([]*slot, sl.idx+1-len(*b)+len(*b)/4)...)
	}
	(*b)[sl.idx] = sl
}

func (b slotSet) clear(sl *slot) {
	if sl.idx < len(b) && b[sl.idx] == sl {
		b[sl.idx] = nil
	}
}
