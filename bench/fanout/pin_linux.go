package fanout

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SplitCPUs divides the CPUs this process may run on into two disjoint
// halves, the first for the server under test and the second for the load
// generator, so that neither one's figures include time spent waiting for
// the other's threads. With two CPUs or fewer it returns ok false: one CPU
// each would halve what the server can use, so the two share instead and
// the report says so.
func SplitCPUs() (server, fleet []int, ok bool) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, nil, false
	}
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) <= 2 {
		return nil, nil, false
	}
	h := len(cpus) / 2
	return cpus[:h], cpus[h:], true
}

// PinSelf restricts every thread of this process to cpus. Threads the Go
// runtime starts later inherit the mask of the thread that creates them,
// which is then one of these; the walk is made twice to catch a thread
// started during the first.
func PinSelf(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("listing threads: %w", err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			// A thread that ended since the listing is no error.
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("pinning thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// CPUList formats cpus as taskset's -c list ("2,3").
func CPUList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
