package xds

import (
	"context"
	"testing"
	"time"
)

// TestBudgetHoldsLargeNotSmall checks on real streams that a large initial
// state waits while the budget is used up, a small push does not, and that
// the transport gives the budget back once it has written the response.
func TestBudgetHoldsLargeNotSmall(t *testing.T) {
	s := NewServer(Options{SendBudget: 1 << 20})
	rs, all := bigAssignments(200) // ~180 KB: a large response
	s.Apply(rs, nil)
	cc := serve(t, s)
	held, err := s.sendBudget.Acquire(context.Background(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	large := openDeltaADS(t, cc)
	large.send(deltaReq(EndpointType, all...))
	small := openDeltaADS(t, cc)
	small.send(deltaReq(EndpointType, all[0]))
	wantNames(t, deltaNames(small.recv()), all[0])
	large.none(100 * time.Millisecond)
	if n := s.InFlight(); n < 1<<20 {
		t.Errorf("InFlight %d while a response waits on a full budget, want at least the budget", n)
	}
	held.Release()
	if r := large.recv(); len(r.Resources) != len(all) {
		t.Fatalf("large response with %d resources, want %d", len(r.Resources), len(all))
	}
	// What the memory policy reads: nothing in flight once written.
	waitFor(t, func() bool { return s.InFlight() == 0 })
}
