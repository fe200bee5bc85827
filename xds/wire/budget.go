package wire

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// DefaultSendBudget is the send budget of an engine whose options leave it
// unset.
const DefaultSendBudget = 256 << 20

// SmallResponse is the size under which a response never waits for the
// send budget: endpoint changes, the common push, are a few hundred bytes
// and must not queue behind a storm of initial states.
const SmallResponse = 64 << 10

// Budget bounds the memory that responses in flight to clients keep alive:
// from before a response is handed to gRPC until the transport has written
// its last byte (or the stream ended). Responses under SmallResponse
// bypass it.
//
// What a response keeps alive is not its wire size. Its records are shared:
// runs of a frame slice the frame's concatenated records (encode.go), other
// entries are their store entry's record, and the transport copies nothing
// of a response, it writes from those. So a response is charged its own
// bytes (the records outside frame runs, as if each kept a superseded
// version) plus the frame records its runs slice, counted once for all the
// responses in flight that slice them, however many clients receive them. A
// cold start of many clients scanning the same frame then costs the frame's
// size once, not once per client; charging wire bytes would make such
// clients take turns for no memory saved. A reconnect storm under churn,
// whose responses slice many frames, and large responses built entry by
// entry wait first come first served until what they add fits; a response
// that adds nothing (its frame's records charged already, no records of
// its own) goes at once.
type Budget struct {
	max int64

	mu      sync.Mutex
	used    int64
	charged map[*Records]*recordsCharge // frame records sliced by responses in flight
	queue   []*budgetWaiter             // FIFO, so a large response is not starved
}

// recordsCharge is a frame's records held by refs responses in flight,
// charged n.
type recordsCharge struct {
	refs int
	n    int64
}

type budgetWaiter struct {
	g     *Grant
	ready chan struct{} // closed when granted
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int) *Budget {
	return &Budget{max: int64(limit), charged: map[*Records]*recordsCharge{}}
}

// Acquire waits until own bytes (at most the whole budget) and, unless a
// response in flight holds them already, the records shared fit, or ctx
// ends. shared may be nil. The grant must be released once.
func (b *Budget) Acquire(ctx context.Context, own int, shared *Records) (*Grant, error) {
	g := &Grant{b: b, n: min(int64(own), b.max), shared: shared}
	b.mu.Lock()
	if b.fitsLocked(g, len(b.queue) == 0) {
		b.takeLocked(g)
		b.mu.Unlock()
		return g, nil
	}
	w := &budgetWaiter{g: g, ready: make(chan struct{})}
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
			g.Done.Store(true)
			b.releaseLocked(g)
		default:
			// slices.Delete clears the vacated slot: the queue's array
			// must not keep the waiter (and the records its grant
			// references) alive.
			if i := slices.Index(b.queue, w); i >= 0 {
				b.queue = slices.Delete(b.queue, i, i+1)
			}
			b.grantLocked() // the head may have changed
		}
		return nil, ctx.Err()
	}
}

// Reserve acquires what response m keeps alive in flight (its charge).
func (b *Budget) Reserve(ctx context.Context, m Msg) (*Grant, error) {
	own, shared := m.Charge()
	return b.Acquire(ctx, own, shared)
}

// needLocked is what granting g adds to the bytes in use.
func (b *Budget) needLocked(g *Grant) int64 {
	n := g.n
	if g.shared != nil && b.charged[g.shared] == nil {
		n += min(int64(len(g.shared.Buf)), b.max)
	}
	return n
}

// fitsLocked reports whether g may be granted now: it adds nothing (its
// frame's records are charged already), or it is first in line (head) and
// fits, or nothing else is in flight (a response larger than the whole
// budget goes alone).
func (b *Budget) fitsLocked(g *Grant, head bool) bool {
	n := b.needLocked(g)
	return n == 0 || head && (b.used+n <= b.max || b.used == 0)
}

func (b *Budget) takeLocked(g *Grant) {
	b.used += g.n
	if g.shared == nil {
		return
	}
	p := b.charged[g.shared]
	if p == nil {
		p = &recordsCharge{n: min(int64(len(g.shared.Buf)), b.max)}
		b.charged[g.shared] = p
		b.used += p.n
	}
	p.refs++
}

func (b *Budget) releaseLocked(g *Grant) {
	b.used -= g.n
	if g.shared != nil {
		p := b.charged[g.shared]
		if p.refs--; p.refs == 0 {
			delete(b.charged, g.shared)
			b.used -= p.n
		}
		// A stream keeps its released grants until its next large send;
		// they must not keep a superseded frame's records alive.
		g.shared = nil
	}
	b.grantLocked()
}

// grantLocked wakes the waiters at the head of the queue that now fit, and
// any waiter that adds nothing since a grant charged its frame's records.
//
// The queue is compacted in place and its vacated slots cleared: a granted
// waiter left in the array (even before the slice's start, which the array
// keeps alive) would keep its grant's frame records alive after the
// response was sent and the frame superseded.
func (b *Budget) grantLocked() {
	kept := b.queue[:0]
	head := true // still granting from the head, first come first served
	for _, w := range b.queue {
		if b.fitsLocked(w.g, head) {
			b.takeLocked(w.g)
			close(w.ready)
			continue
		}
		head = false
		kept = append(kept, w)
	}
	clear(b.queue[len(kept):])
	b.queue = kept
}

// Waiting is the number of grants waiting for room.
func (b *Budget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// InUse is the bytes the budget has granted and not had back.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Grant is what one response holds of the budget: its own bytes and a
// reference to the frame records it slices.
type Grant struct {
	b      *Budget
	n      int64
	shared *Records
	Done   atomic.Bool
}

// Release returns the grant; later calls do nothing.
func (g *Grant) Release() {
	if g == nil || g.Done.Swap(true) {
		return
	}
	g.b.mu.Lock()
	g.b.releaseLocked(g)
	g.b.mu.Unlock()
}

// releaser is the mem.BufferPool of a response's last buffer: gRPC's
// transport frees each buffer once written, so the Put of the last one is
// the moment the response left the process.
type releaser struct{ g *Grant }

func (r releaser) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (r releaser) Put(*[]byte)       { r.g.Release() }

// TrackedTail wraps tail so that writing it releases g. mem.NewBuffer pools
// only buffers whose capacity is above gRPC's pooling threshold, so the
// envelope bytes get that capacity.
func TrackedTail(tail []byte, g *Grant) mem.Buffer {
	if g == nil {
		return mem.SliceBuffer(tail)
	}
	const pooled = 1 << 11 // above mem's pooling threshold (1 KiB)
	b := make([]byte, len(tail), max(len(tail), pooled))
	copy(b, tail)
	return mem.NewBuffer(&b, releaser{g})
}

// Msg is a response as handed to gRPC: Codec sends its buffers; any
// other codec sees a proto.Message (built on first use).
type Msg interface {
	protoreflect.ProtoMessage
	Buffers() mem.BufferSlice
	SendState() *Tracking
	// charge is what the response keeps alive in flight, for the send
	// budget: the bytes of its records outside frame runs, and the frame
	// records its runs slice (nil without runs).
	Charge() (own int, shared *Records)
}

// Tracking ties a response to its share of the send budget.
type Tracking struct {
	Grant   *Grant      // nil: not budgeted
	Encoded atomic.Bool // buffers were handed out: their last Free releases g
}

// SendState returns t: a Msg embeds its Tracking.
func (t *Tracking) SendState() *Tracking { return t }
