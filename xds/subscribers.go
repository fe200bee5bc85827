package xds

import "math/bits"

// subscribers is the set of watches subscribed to one slot by name, as a
// bitmap over the dense watch indexes of the slot's type: one bit per
// watch of the type instead of a map entry per subscriber, and a change
// walks one word per 64 watches. Guarded by Server.mu.
type subscribers struct {
	words []uint64
	n     int
}

func (s *subscribers) add(i int) {
	w := i / 64
	if w >= len(s.words) {
		s.words = append(s.words, make([]uint64, w+1-len(s.words))...)
	}
	if s.words[w]&(1<<(i%64)) == 0 {
		s.words[w] |= 1 << (i % 64)
		s.n++
	}
}

func (s *subscribers) remove(i int) {
	w := i / 64
	if w < len(s.words) && s.words[w]&(1<<(i%64)) != 0 {
		s.words[w] &^= 1 << (i % 64)
		s.n--
	}
}

func (s *subscribers) has(i int) bool {
	w := i / 64
	return w < len(s.words) && s.words[w]&(1<<(i%64)) != 0
}

func (s *subscribers) len() int { return s.n }

// each calls f with the index of every subscriber.
func (s *subscribers) each(f func(i int)) {
	for w, word := range s.words {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			f(w*64 + b)
			word &^= 1 << b
		}
	}
}

// watchIndex is the watches of a type, guarded by Server.mu: every watch
// by its dense index (watch.idx; nil = free, wfree the free ones), which
// the subscribers bitmaps of the type's slots are over, and the wildcard
// watches by their client's scope ID (0: unscoped), so that a change is
// marked only on the wildcards of the scopes it is in
// (fanout.subscribers).
type watchIndex struct {
	watches []*watch
	wfree   []int
	wild    map[int]map[*watch]struct{}
}

// addWild adds the wildcard watch w to the wildcards of its client's
// scope. Server.mu and client.mu held.
func (t *watchIndex) addWild(w *watch) {
	ws := t.wild[w.c.scope]
	if ws == nil {
		ws = make(map[*watch]struct{})
		t.wild[w.c.scope] = ws
	}
	ws[w] = struct{}{}
}

// dropWild removes w from the wildcards. Server.mu and client.mu held.
func (t *watchIndex) dropWild(w *watch) {
	if ws := t.wild[w.c.scope]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(t.wild, w.c.scope)
		}
	}
}

// addWatch gives w a dense index in its type. Server.mu held.
func (t *watchIndex) addWatch(w *watch) {
	if n := len(t.wfree); n > 0 {
		w.idx, t.wfree = t.wfree[n-1], t.wfree[:n-1]
		t.watches[w.idx] = w
		return
	}
	w.idx = len(t.watches)
	t.watches = append(t.watches, w)
}

// removeWatch frees w's index once it is in no subscriber set. Server.mu
// held.
func (t *watchIndex) removeWatch(w *watch) {
	t.watches[w.idx] = nil
	t.wfree = append(t.wfree, w.idx)
}
