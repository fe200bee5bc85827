// Package heaptest measures what a piece of state keeps on the heap, for
// tests that bound the memory a type retains (after a shrink, say). It
// imports nothing of the project, so that the tests of every package can
// use it.
package heaptest

import "runtime"

// Live is the heap in use after a full collection, sweep included: what
// the process keeps reachable, plus whatever another goroutine allocated
// since. A test compares two readings around the state it measures, with
// a bound well above that noise (tens of kilobytes) and well below what a
// regression would keep.
func Live() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
