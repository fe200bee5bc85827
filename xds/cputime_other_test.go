//go:build !linux

package xds

import "time"

// onThread runs f and returns the wall time it took.
func onThread(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
