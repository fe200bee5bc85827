package target

import (
	"context"
	"sync"
	"time"
)

// batcher coalesces changes the way the bridge's source manager
// (sources.Manager) does before it publishes: a batch is flushed holdoff
// after its first change, so that a burst becomes one publish and
// sustained churn one publish per holdoff (maxHoldoff only bounds holdoff,
// as in the bridge). It is used for every implementation alike, so that
// the stock caches get the same batching as xdsbridge.
type batcher struct {
	holdoff, maxHoldoff time.Duration
	flush               func(ks []int) // called from run's goroutine only
	kick                chan struct{}  // capacity 1: "the deadline may have moved"

	mu      sync.Mutex
	pending []int
	first   time.Time // of the pending batch
}

// maxFactor is the bound of a batch in holdoffs, as in the bridge's
// defaults (sources.DefaultHoldoff 100ms, DefaultMaxHoldoff 1s).
const maxFactor = 10

// newBatcher returns a batcher; maxHoldoff <= 0 means maxFactor × holdoff.
func newBatcher(holdoff, maxHoldoff time.Duration, flush func([]int)) *batcher {
	if maxHoldoff <= 0 {
		maxHoldoff = maxFactor * holdoff
	}
	return &batcher{holdoff: holdoff, maxHoldoff: max(maxHoldoff, holdoff), flush: flush, kick: make(chan struct{}, 1)}
}

// add records change k and returns at once.
func (b *batcher) add(k int) {
	now := time.Now()
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.first = now
	}
	b.pending = append(b.pending, k)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default: // a kick is already waiting; run will read the new deadline
	}
}

// due returns the pending batch if its deadline has passed, else the time
// left until it (0 with a nil batch when nothing is pending).
func (b *batcher) due(now time.Time) ([]int, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return nil, 0
	}
	deadline := b.first.Add(min(b.holdoff, b.maxHoldoff))
	if left := deadline.Sub(now); left > 0 {
		return nil, left
	}
	ks := b.pending
	b.pending = nil
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
			ks, left := b.due(time.Now())
			if ks == nil {
				if left > 0 {
					timer.Reset(left)
				}
				break
			}
			b.flush(ks)
		}
	}
}
