package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdsbridge/xdsbridge/test/childproc"
)

// Start starts bin with its output in logPath. The child has its own
// process group, so that a ctrl-C at the terminal reaches the harness
// alone, which then stops its children in order (Stop); on Linux the
// kernel kills the child if the harness dies without doing so.
func Start(logPath, bin string, args ...string) (*exec.Cmd, error) {
	return startLogged(os.Create, logPath, bin, args...)
}

// StartAppend is Start appending to the log (a process started
// again).
func StartAppend(logPath, bin string, args ...string) (*exec.Cmd, error) {
	return startLogged(func(p string) (*os.File, error) {
		return os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}, logPath, bin, args...)
}

func startLogged(open func(string) (*os.File, error), logPath, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := open(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.TieInOwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	return cmd, nil
}

// Stop ends a child: SIGTERM, then SIGKILL after 10 s.
func Stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Poll checks cond every 50 ms until it holds or the limit passes.
func Poll(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return errTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// CPU reads utime+stime of a process from /proc/<pid>/stat.
func CPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fs := strings.Fields(s[i+1:])
	if len(fs) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(fs[11], 10, 64)
	st, err2 := strconv.ParseInt(fs[12], 10, 64)
	if errors.Join(err1, err2) != nil {
		return 0
	}
	const clockTick = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clockTick
}

// Mem reads VmHWM and VmRSS, in bytes, from /proc/<pid>/status.
func Mem(pid int) (hwm, rss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		if k == "VmHWM" {
			hwm = kb << 10
		} else {
			rss = kb << 10
		}
	}
	return hwm, rss
}

// LoadLine is /proc/loadavg as it reads.
func LoadLine() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// LoadOf is the 1-minute load average of a /proc/loadavg line (0 if
// empty).
func LoadOf(line string) float64 {
	f, _ := strconv.ParseFloat(strings.Fields(line + " 0")[0], 64)
	return f
}

// SelfCPU is this process's CPU time so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// errTimeout marks a change or a start that did not converge in time.
var errTimeout = errors.New("timed out")
