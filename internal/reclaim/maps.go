package reclaim

// Go maps keep the memory of the most entries they ever held, however many
// are deleted since, and so does a slice that is resliced. A state kept in
// maps (the services of a source, what was published, the debug indexes)
// that shrinks from 100,000 services to 6 would keep 100,000 services'
// worth of buckets for as long as it stays small, where no collection can
// return them. Map and Buffer give that memory back once what is kept has
// shrunk well below what it was.

import "maps"

// minPeak is the size under which nothing is copied: small maps cost
// little whatever their history.
const minPeak = 1024

// Map returns m, or a copy of it sized for its entries once they are fewer
// than a quarter of *peak: the most m held since it was made, which the
// caller keeps beside it and Map raises. A caller calls it after each batch
// of changes, so that *peak sees a batch's growth; the copy costs
// O(len(m)) once per quartering.
func Map[M ~map[K]V, K comparable, V any](m M, peak *int) M {
	n := len(m)
	if n > *peak {
		*peak = n
		return m
	}
	if *peak < minPeak || n >= *peak/4 {
		return m
	}
	c := make(M, n)
	maps.Copy(c, m)
	*peak = n
	return c
}

// Buffer returns buf if its capacity suits n bytes (at least n, and not
// more than twice n plus a little), else nil: a buffer kept for reuse
// that once held a much larger content is given up rather than kept for
// a small one.
func Buffer(buf []byte, n int) []byte {
	if c := cap(buf); c < n || c > 2*n+minPeak<<6 {
		return nil
	}
	return buf
}
