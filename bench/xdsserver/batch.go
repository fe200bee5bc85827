package xdsserver

import (
	"context"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
)

// batcher coalesces changes with the bridge's own rule, manager.Cadence,
// the one its source manager (manager.Manager) publishes by: at most one
// publish per holdoff, exactly one per holdoff under steady churn, and no
// change waits longer than the holdoff. It is used for every
// implementation alike, so that the stock caches get the same batching as
// xdsbridge.
type batcher struct {
	flush func(ks []int) // called from run's goroutine only
	kick  chan struct{}  // capacity 1: "the deadline may have moved"

	mu      sync.Mutex
	cad     manager.Cadence
	pending []int
	due     time.Time // of the pending batch
}

// maxFactor is the bound of a batch in holdoffs, as in the bridge's
// defaults (manager.DefaultHoldoff 100ms, DefaultMaxHoldoff 1s).
const maxFactor = 10

// newBatcher returns a batcher; maxHoldoff <= 0 means maxFactor × holdoff.
// As in the bridge, maxHoldoff only bounds holdoff.
func newBatcher(holdoff, maxHoldoff time.Duration, flush func([]int)) *batcher {
	if maxHoldoff <= 0 {
		maxHoldoff = maxFactor * holdoff
	}
	return &batcher{cad: manager.Cadence{Holdoff: min(holdoff, maxHoldoff)}, flush: flush, kick: make(chan struct{}, 1)}
}

// add records changes ks and returns at once.
func (b *batcher) add(ks ...int) {
	if len(ks) == 0 {
		return
	}
	now := time.Now()
	b.mu.Lock()
	b.due = b.cad.Add(now)
	b.pending = append(b.pending, ks...)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default: // a kick is already waiting; run will read the new deadline
	}
}

// take returns the pending batch if its deadline has passed, else the time
// left until it (0 with a nil batch when nothing is pending).
func (b *batcher) take(now time.Time) ([]int, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return nil, 0
	}
	if left := b.due.Sub(now); left > 0 {
		return nil, left
	}
	ks := b.pending
	b.pending = nil
	b.cad.Published(now)
	return ks, 0
}

// run flushes batches when due until ctx is done; what is pending then is
// dropped with the server.
func (b *batcher) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		case <-timer.C:
		}
		// Changes may arrive during a flush; the loop looks again.
		for {
			ks, left := b.take(time.Now())
			if ks == nil {
				if left > 0 {
					timer.Reset(left)
				}
				break
			}
			b.flush(ks)
			b.mu.Lock()
			b.cad.Finished(time.Now())
			b.mu.Unlock()
		}
	}
}
