package xds

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// onThread runs f locked to its OS thread and returns the CPU time that
// thread spent: unlike wall time, it does not count waiting for a CPU on a
// busy machine.
func onThread(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var a, b unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &a)
	f()
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &b)
	return time.Duration(b.Nano() - a.Nano())
}
