// Package testwait lets a test wait for a condition with one generous
// bound. It imports nothing of the project, so that the tests of every
// package can use it: bridgetest, which starts the whole bridge, cannot be
// imported by the tests of the packages the bridge is built of.
package testwait

import (
	"testing"
	"time"
)

// Patience is how long a test waits for what it expects to happen. It is a
// failure detector, not a measurement: a race-built bridge on a loaded
// machine must never reach it, so it is far longer than anything waited
// for takes. Latencies are logged, and their targets are the benchmarks'.
const Patience = 30 * time.Second

// Eventually polls cond every 10ms until it holds, failing the test when
// timeout passes first. cond runs on the test's goroutine, so it may fail
// the test itself on what it finds.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
