//go:build unix

package freeport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// leases holds the lock files of the ports this process took: closing one
// (or exiting) releases its lock.
var leases = map[int]*os.File{}

// openLease opens (creating it and its directory) the lock file of port p.
func openLease(p int) (*os.File, error) {
	dir := filepath.Join(os.TempDir(), "xdsbridge-freeport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
}

// lease takes port p for this process against every other process that
// uses this package: an exclusive lock on a file named after the port,
// which the kernel releases when the process exits. Without it two test
// binaries (go test runs packages in parallel) can draw the same port and
// both find it free before either child process binds it.
func lease(p int) bool {
	f, err := openLease(p)
	if err != nil {
		return true // nowhere to coordinate: the probe alone decides
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	leases[p] = f
	return true
}
