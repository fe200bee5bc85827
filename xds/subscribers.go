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
