package wire

import (
	"context"
	"runtime"
	"testing"
	"weak"
)

func TestBudgetFIFOAndCancel(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	g1, err := b.Acquire(ctx, 60, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 50 does not fit; 10 would, but waits behind it (first come first served).
	got := make(chan int, 2)
	go func() { g, _ := b.Acquire(ctx, 50, nil); got <- 50; g.Release() }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 })
	go func() { g, _ := b.Acquire(ctx, 10, nil); got <- 10; g.Release() }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 2 })
	select {
	case n := <-got:
		t.Fatalf("%d granted while the budget was full", n)
	default:
	}
	g1.Release()
	g1.Release() // a second release changes nothing
	if a, b := <-got, <-got; a+b != 60 {
		t.Errorf("granted %d and %d, want both waiters (50 and 10)", a, b)
	}
	waitFor(t, func() bool { return b.InUse() == 0 })

	// A request larger than the budget is clamped to it; a waiter whose
	// stream ends leaves the queue.
	big, err := b.Acquire(ctx, 1000, nil)
	if err != nil || big.n != 100 {
		t.Fatalf("acquire(1000) = %v, %v; want the whole budget", big, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := b.Acquire(cctx, 1, nil); errc <- err }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Error("a cancelled wait was granted")
	}
	big.Release()
	if n := b.InUse(); n != 0 {
		t.Errorf("%d bytes in use after every release", n)
	}
}

// TestBudgetChargesSharedRecordsOnce checks that frame records sliced by
// several responses in flight count once, that a response adding nothing
// to what is charged already goes past the queue, and that the records
// are charged until the last response slicing them is released.
func TestBudgetChargesSharedRecordsOnce(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	fr := &Records{Buf: make([]byte, 80)}
	g1, err := b.Acquire(ctx, 0, fr)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := b.Acquire(ctx, 0, fr)
	if err != nil || b.InUse() != 80 {
		t.Fatalf("second response of the same records: %v, %d bytes in use; want 80", err, b.InUse())
	}
	// 30 own bytes do not fit next to the charged records: it waits, and a
	// third response of the charged records does not wait behind it.
	got := make(chan *Grant, 1)
	go func() { g, _ := b.Acquire(ctx, 30, nil); got <- g }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 })
	g3, err := b.Acquire(ctx, 0, fr)
	if err != nil || b.InUse() != 80 {
		t.Fatalf("third response of the same records: %v, %d bytes in use; want 80", err, b.InUse())
	}
	g1.Release()
	g2.Release()
	select {
	case <-got:
		t.Fatal("granted while a response still holds the records")
	default:
	}
	g3.Release()
	g := <-got
	if n := b.InUse(); n != 30 {
		t.Errorf("%d bytes in use once the records are released, want the waiter's 30", n)
	}
	g.Release()
	if n := b.InUse(); n != 0 {
		t.Errorf("%d bytes in use after every release", n)
	}

	// A waiter behind the head whose records the head holds is granted with
	// it; another frame's records are charged apart.
	held, _ := b.Acquire(ctx, 90, nil)
	grants := make(chan *Grant, 2)
	go func() { g, _ := b.Acquire(ctx, 0, fr); grants <- g }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 })
	go func() { g, _ := b.Acquire(ctx, 0, fr); grants <- g }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 2 })
	held.Release()
	ga, gb := <-grants, <-grants
	if n := b.InUse(); n != 80 {
		t.Errorf("%d bytes in use with two responses of one frame, want 80", n)
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := b.Acquire(cctx, 0, &Records{Buf: make([]byte, 50)}); errc <- err }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Error("another frame's records were granted next to 80 charged bytes of 100")
	}
	ga.Release()
	gb.Release()
	if n := b.InUse(); n != 0 {
		t.Errorf("%d bytes in use after every release", n)
	}
}

// TestBudgetDropsGrantedWaiters checks that the budget's queue keeps no
// reference to a waiter once it is granted (or gives up): a waiter's
// grant holds the frame records its response slices, which must not stay
// alive after the response was sent and the frame superseded.
func TestBudgetDropsGrantedWaiters(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	full, err := b.Acquire(ctx, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	granted := &Records{Buf: make([]byte, 50)}
	gone := weak.Make(granted)
	c := make(chan *Grant, 1)
	go func(r *Records) { g, _ := b.Acquire(ctx, 10, r); c <- g }(granted)
	granted = nil //nolint:ineffassign // says where the test lets go of it, before it checks the memory is freed
	waitFor(t, func() bool { return queued(b) == 1 })
	full.Release()
	(<-c).Release()
	if reachable(gone) {
		t.Error("the records of a granted and released waiter are still reachable")
	}

	// A waiter that gives up, queued behind one granted later.
	full, _ = b.Acquire(ctx, 100, nil)
	go func() { g, _ := b.Acquire(ctx, 10, nil); c <- g }()
	waitFor(t, func() bool { return queued(b) == 1 })
	cancelled := &Records{Buf: make([]byte, 50)}
	left := weak.Make(cancelled)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func(r *Records) { _, err := b.Acquire(cctx, 10, r); errc <- err }(cancelled)
	cancelled = nil //nolint:ineffassign // says where the test lets go of it, before it checks the memory is freed
	waitFor(t, func() bool { return queued(b) == 2 })
	cancel()
	if <-errc == nil {
		t.Fatal("a cancelled wait was granted")
	}
	full.Release()
	(<-c).Release()
	if reachable(left) {
		t.Error("the records of a cancelled waiter are still reachable")
	}
	if n := b.InUse(); n != 0 {
		t.Errorf("%d bytes in use after every release", n)
	}
}

// A stream keeps its released grants until its next large send: a grant
// given back no longer keeps its frame's records alive.
func TestBudgetReleasedGrantDropsRecords(t *testing.T) {
	b := NewBudget(100)
	recs := &Records{Buf: make([]byte, 50)}
	gone := weak.Make(recs)
	g, err := b.Acquire(context.Background(), 10, recs)
	if err != nil {
		t.Fatal(err)
	}
	recs = nil //nolint:ineffassign // says where the test lets go of it, before it checks the memory is freed
	g.Release()
	if reachable(gone) {
		t.Error("a released grant still keeps its frame's records reachable")
	}
	runtime.KeepAlive(g)
}
