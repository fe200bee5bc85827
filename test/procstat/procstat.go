// Package procstat reads what the kernel counts for a process (Linux
// procfs): its CPU time, resident memory and I/O. The fault tests and the
// fault benchmark read the bridge's work this way, from outside the bridge.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which is 100 on every Linux architecture Go supports (sysconf's
// _SC_CLK_TCK reports it without cgo nowhere).
const clockTick = 10 * time.Millisecond

// Sample is one reading of a process's counters.
type Sample struct {
	// CPU is the user and system time the process has used.
	CPU time.Duration
	// RSS is its resident memory in bytes.
	RSS int64
	// ReadBytes is what it has read by read-like system calls (files and
	// sockets: /proc/PID/io's rchar); ReadCalls how many such calls it made.
	ReadBytes, ReadCalls int64
}

// Read samples the process pid.
func Read(pid int) (Sample, error) {
	var s Sample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after its closing parenthesis start at field 3 (state).
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	// utime and stime are fields 14 and 15, rss (in pages) field 24.
	if len(f) < 22 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return s, fmt.Errorf("/proc/%d/stat: unparsable times or rss", pid)
	}
	s.CPU = time.Duration(utime+stime) * clockTick
	s.RSS = rss * int64(os.Getpagesize())
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(string(io)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "rchar":
			s.ReadBytes = n
		case "syscr":
			s.ReadCalls = n
		}
	}
	return s, nil
}

// Sub returns the counters accrued since before; RSS is the later value.
func (s Sample) Sub(before Sample) Sample {
	return Sample{CPU: s.CPU - before.CPU, RSS: s.RSS, ReadBytes: s.ReadBytes - before.ReadBytes,
		ReadCalls: s.ReadCalls - before.ReadCalls}
}
