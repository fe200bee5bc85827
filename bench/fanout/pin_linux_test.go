package fanout

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
)

func TestPinSelf(t *testing.T) {
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Skip("no affinity here:", err)
	}
	var all []int
	for c := range len(orig) * 64 {
		if orig.IsSet(c) {
			all = append(all, c)
		}
	}
	t.Cleanup(func() {
		if err := PinSelf(all); err != nil {
			t.Error("restoring the mask:", err)
		}
	})
	one := all[len(all)-1]
	if err := PinSelf([]int{one}); err != nil {
		t.Fatal(err)
	}
	// A thread started after the pinning inherits it.
	got := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // a thread of its own, ended with the goroutine
		var s unix.CPUSet
		if err := unix.SchedGetaffinity(0, &s); err != nil {
			got <- -1
			return
		}
		got <- s.Count()
	}()
	if n := <-got; n != 1 {
		t.Errorf("a new thread runs on %d CPUs, want 1", n)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		var s unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &s); err != nil {
			continue // ended since the listing
		}
		if s.Count() != 1 || !s.IsSet(one) {
			t.Errorf("thread %d runs on %d CPUs, want only CPU %d", tid, s.Count(), one)
		}
	}
	if got := CPUList([]int{2, 3, 5}); got != "2,3,5" {
		t.Errorf("CPUList = %q", got)
	}
}

// TestServerPinned starts a server on one CPU: every thread of it (the
// process's mask, which its threads inherit) is on that CPU alone.
func TestServerPinned(t *testing.T) {
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Skip("no affinity here:", err)
	}
	one := -1
	for c := range len(orig) * 64 {
		if orig.IsSet(c) {
			one = c
		}
	}
	cfg := config(t, "xdsbridge", true)
	cfg.ServerCPUs = strconv.Itoa(one)
	srv, err := xdsserver.Start(context.Background(), cfg.Bin, cfg.serverOptions(), cfg.ServerCPUs, filepath.Join(cfg.OutDir, "pinned.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(srv.Pid(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Count() != 1 || !s.IsSet(one) {
		t.Errorf("server runs on %d CPUs, want only CPU %d", s.Count(), one)
	}
}
