//go:build unix

package freeport

import (
	"syscall"
	"testing"
)

// TestLeaseExcludesOtherHolders: a port whose lock file another holder
// (standing in for another process: a lock of its own open file) has
// locked is not leased; once that holder lets go, it is.
func TestLeaseExcludesOtherHolders(t *testing.T) {
	const p = 9 // below low: Take never draws it, so the test's lease is its own
	other, err := openLease(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if lease(p) {
		t.Fatal("leased a port another holder has locked")
	}
	other.Close()
	if !lease(p) {
		t.Fatal("the port was not leased once its holder let go")
	}
	leases[p].Close()
	delete(leases, p)
}
