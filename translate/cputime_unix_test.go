//go:build unix

package translate

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) this process has used. The
// benchmark reports it per op because wall time is unreliable on a shared,
// overloaded machine; it includes the garbage collector's share.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
