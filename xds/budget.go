package xds

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/mem"
)

// DefaultSendBudget is Options.SendBudget when unset.
const DefaultSendBudget = 256 << 20

// smallResponse is the size under which a response never waits for the
// send budget: endpoint changes, the common push, are a few hundred bytes
// and must not queue behind a storm of initial states.
const smallResponse = 64 << 10

// budget bounds the bytes of large responses in flight to clients: from
// before a response is handed to gRPC until the transport has written its
// last byte (or the stream ended). A reconnect storm of 1,000 clients each
// owed a 2.7 MB initial state then sends about SendBudget/2.7 MB of them at
// a time, first come first served, instead of queueing all of them in the
// transport at once; responses under smallResponse bypass it. Since
// responses share their resource records (wire.go), what a response in
// flight holds of its own is its buffer list and gRPC's framing, a small
// fraction of its wire size, so the budget bounds memory with a wide
// margin and mainly orders the storm.
type budget struct {
	max int64

	mu    sync.Mutex
	used  int64
	queue []*budgetWaiter // FIFO, so a large response is not starved
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when granted
}

func newBudget(max int) *budget { return &budget{max: int64(max)} }

// acquire waits until n bytes (at most the whole budget) are free, or ctx
// ends. The grant must be released once.
func (b *budget) acquire(ctx context.Context, n int) (*grant, error) {
	g := &grant{b: b, n: min(int64(n), b.max)}
	b.mu.Lock()
	if len(b.queue) == 0 && b.used+g.n <= b.max {
		b.used += g.n
		b.mu.Unlock()
		return g, nil
	}
	w := &budgetWaiter{n: g.n, ready: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return g, nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.used -= g.n
			b.grantLocked()
		default:
			for i, q := range b.queue {
				if q == w {
					b.queue = append(b.queue[:i], b.queue[i+1:]...)
					break
				}
			}
			b.grantLocked() // the head may have changed
		}
		return nil, ctx.Err()
	}
}

// grantLocked wakes the waiters at the head of the queue that now fit.
func (b *budget) grantLocked() {
	for len(b.queue) > 0 && b.used+b.queue[0].n <= b.max {
		w := b.queue[0]
		b.queue = b.queue[1:]
		b.used += w.n
		close(w.ready)
	}
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// grant is bytes of the budget held by one response.
type grant struct {
	b    *budget
	n    int64
	done atomic.Bool
}

// release returns the bytes; later calls do nothing.
func (g *grant) release() {
	if g == nil || g.done.Swap(true) {
		return
	}
	g.b.mu.Lock()
	g.b.used -= g.n
	g.b.grantLocked()
	g.b.mu.Unlock()
}

// releaser is the mem.BufferPool of a response's last buffer: gRPC's
// transport frees each buffer once written, so the Put of the last one is
// the moment the response left the process.
type releaser struct{ g *grant }

func (r releaser) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (r releaser) Put(*[]byte)       { r.g.release() }

// trackedTail wraps tail so that writing it releases g. mem.NewBuffer pools
// only buffers whose capacity is above gRPC's pooling threshold, so the
// envelope bytes get that capacity.
func trackedTail(tail []byte, g *grant) mem.Buffer {
	if g == nil {
		return mem.SliceBuffer(tail)
	}
	const pooled = 1 << 11 // above mem's pooling threshold (1 KiB)
	b := make([]byte, len(tail), max(len(tail), pooled))
	copy(b, tail)
	return mem.NewBuffer(&b, releaser{g})
}
