package xds

import "time"

// pending is what a watch's client is owed and not yet sent, guarded by
// client.mu: requests and Apply queue changes holding Server.mu too, the
// writer takes them holding client.mu alone (owed.go).
type pending struct {
	// dirty coalesces the changes not yet sent to the newest per slot.
	dirty map[*slot]pend
	// waiting are the subscribed names without an entry the client waits
	// for, until their wait ends (see doc.go, "Always answer").
	waiting map[*slot]waitSince
	// dirtyPeak is the most pending changes dirty held since it was last
	// made: a map keeps the memory of its largest size, so an emptied one
	// that once held a burst is made again (settleDirty).
	dirtyPeak int
	// scan is the frame still to be compared with what the client holds,
	// from scanAt on (scan.go); nil when none is pending.
	scan   *frame
	scanAt int
	// firstOwed: a first response is owed (wildcard), even if empty.
	firstOwed bool
}

// pend is a coalesced pending push of one slot: the newest entry (nil =
// removed) and whether it must be sent even if the client holds it.
type pend struct {
	e     *entry
	force bool
}

// waitSince records when a subscribed name without an entry was requested;
// immediate names (known but hidden from this client) are answered at once.
// pushes is the watch's response count then: a SotW CDS/LDS response sent
// after the request already told the client the name is absent.
type waitSince struct {
	at        time.Time
	immediate bool
	pushes    uint64
}

// undirty drops sl's pending change p and reports whether it was the last
// owed removal of sl (see slot.owed): the caller then releases sl, or
// queues it for release (orphanQueue.add) if it holds only client.mu.
// client.mu held.
func (q *pending) undirty(sl *slot, p pend) (last bool) {
	delete(q.dirty, sl)
	return p.e == nil && sl.owed.Add(-1) == 0
}

// settleDirty makes the dirty map again once a burst (an initial state, a
// mass removal) has drained: maps never shrink, and a client would keep
// the buckets of its largest push for as long as it stays. client.mu held.
func (q *pending) settleDirty() {
	if len(q.dirty) == 0 && q.dirtyPeak > 256 {
		q.dirty, q.dirtyPeak = make(map[*slot]pend), 0
	}
}

// dirtyIn reports whether a pending change may be of a slot of chunk k:
// a few pending changes (steady churn while a client starts) are looked
// at, many are assumed to be. client.mu held.
func (q *pending) dirtyIn(k int) bool {
	if len(q.dirty) > chunkLen/4 {
		return true
	}
	for sl := range q.dirty {
		if sl.idx>>chunkBits == k {
			return true
		}
	}
	return false
}

// earliest is the earlier of first (zero: none) and the earliest deadline
// of the names waiting (see deadline). client.mu held.
func (q *pending) earliest(first, readyAt time.Time, wait time.Duration) time.Time {
	for _, ws := range q.waiting {
		if d := deadline(ws, readyAt, wait); first.IsZero() || d.Before(first) {
			first = d
		}
	}
	return first
}

// deadline is when a name waiting since ws is answered without it: at the
// end of the window of wait after readiness, at once after it (see doc.go,
// "Always answer").
func deadline(ws waitSince, readyAt time.Time, wait time.Duration) time.Time {
	if ws.immediate {
		return readyAt
	}
	if end := readyAt.Add(wait); ws.at.Before(end) {
		return end
	}
	return ws.at
}
