package xds

import (
	"context"
	"testing"
	"time"
)

func TestBudgetFIFOAndCancel(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	g1, err := b.acquire(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	// 50 does not fit; 10 would, but waits behind it (first come first served).
	got := make(chan int, 2)
	go func() { g, _ := b.acquire(ctx, 50); got <- 50; g.release() }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 })
	go func() { g, _ := b.acquire(ctx, 10); got <- 10; g.release() }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 2 })
	select {
	case n := <-got:
		t.Fatalf("%d granted while the budget was full", n)
	default:
	}
	g1.release()
	g1.release() // a second release changes nothing
	if a, b := <-got, <-got; a+b != 60 {
		t.Errorf("granted %d and %d, want both waiters (50 and 10)", a, b)
	}
	waitFor(t, func() bool { return b.inUse() == 0 })

	// A request larger than the budget is clamped to it; a waiter whose
	// stream ends leaves the queue.
	big, err := b.acquire(ctx, 1000)
	if err != nil || big.n != 100 {
		t.Fatalf("acquire(1000) = %v, %v; want the whole budget", big, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := b.acquire(cctx, 1); errc <- err }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Error("a cancelled wait was granted")
	}
	big.release()
	if n := b.inUse(); n != 0 {
		t.Errorf("%d bytes in use after every release", n)
	}
}

// TestBudgetHoldsLargeNotSmall checks on real streams that a large initial
// state waits while the budget is used up, a small push does not, and that
// the transport gives the budget back once it has written the response.
func TestBudgetHoldsLargeNotSmall(t *testing.T) {
	s := NewServer(Options{SendBudget: 1 << 20})
	rs, all := bigAssignments(200) // ~180 KB: a large response
	s.Apply(rs, nil)
	cc := serve(t, s)
	held, err := s.budget.acquire(context.Background(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	large := openDeltaADS(t, cc)
	large.send(deltaReq(EndpointType, all...))
	small := openDeltaADS(t, cc)
	small.send(deltaReq(EndpointType, all[0]))
	wantNames(t, deltaNames(small.recv()), all[0])
	large.none(100 * time.Millisecond)
	held.release()
	if r := large.recv(); len(r.Resources) != len(all) {
		t.Fatalf("large response with %d resources, want %d", len(r.Resources), len(all))
	}
	waitFor(t, func() bool { return s.budget.inUse() == 0 })
}
