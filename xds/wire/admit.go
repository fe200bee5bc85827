package wire

import (
	"context"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// DefaultRequestBudget is the request budget of an engine whose options
// leave it unset.
const DefaultRequestBudget = 16 << 20

// SmallRequest is the wire size under which a request never waits for the
// request budget: ACKs and subscription changes of a few names must not
// queue behind a storm of reconnects.
const SmallRequest = 64 << 10

// The send budget bounds responses; this one bounds requests. A
// reconnecting Envoy's first requests list every resource it holds
// (initial_resource_versions, several times larger once decoded into a map
// than on the wire), and in a storm every stream's reader decodes its
// request at once, however few CPUs there are to handle them, and then
// queues for the server's lock with the decoded request in hand: the peak
// memory of a storm would grow with the fleet times its resources. Instead a
// large request waits, first come first served, before it is decoded,
// until the wire bytes of the requests being decoded and handled fit in
// the request budget (the engine's Options.RequestBudget); it gives them back once the engine has handled
// it. What a waiting request holds is its wire bytes (gRPC reads a message
// whole before handing it to the codec), the most compact form it has.
//
// The wait needs the engine's codec (Codec): another codec decodes at once.

// Inbound is what a stream's reader receives a request into: the request
// and the budget it is admitted by. It is a proto.Message standing for the
// request, so that any codec can decode into it; Codec recognises it and
// first waits for the budget.
type Inbound struct {
	msg   proto.Message
	ctx   context.Context // the stream's: its end stops the wait
	admit *Budget
	g     *Grant // held from before decoding until release
	// lease is the stream's first read's (see FirstReads): given back once
	// the request is admitted.
	lease *ReadLease
	// initial and initialN are a delta request's initial versions when
	// Codec kept them as records (see unmarshalCompact and InitialVersions).
	initial  string
	initialN int
}

// NewInbound is a request of the stream of ctx, to be received into msg
// and admitted by admit; lease, if not nil, is the stream's first read's.
func NewInbound(ctx context.Context, msg proto.Message, admit *Budget, lease *ReadLease) *Inbound {
	return &Inbound{msg: msg, ctx: ctx, admit: admit, lease: lease}
}

// ReleaseLease gives the first read's lease back: the request was
// admitted, was small, or failed.
func (in *Inbound) ReleaseLease() { in.lease.Release() }

// ProtoReflect is the decoded request's, so that an Inbound passes for a
// proto.Message.
func (in *Inbound) ProtoReflect() protoreflect.Message { return in.msg.ProtoReflect() }

// GetNode is the request's node, for stream interceptors that check it
// (the bridge binds nodes to client certificates) without knowing the
// request's type.
func (in *Inbound) GetNode() *corev3.Node {
	if r, ok := in.msg.(interface{ GetNode() *corev3.Node }); ok {
		return r.GetNode()
	}
	return nil
}

// wait admits a request of n wire bytes: at once if it is small, else once
// the budget has room for it (or the stream ended).
func (in *Inbound) wait(n int) error {
	in.lease.arrived()
	defer in.lease.Release()
	if n < SmallRequest || in.admit == nil || in.g != nil {
		return nil
	}
	g, err := in.admit.Acquire(in.ctx, n, nil)
	if err != nil {
		return err
	}
	in.g = g
	return nil
}

// Release gives the request's bytes back: it has been handled (or
// dropped). Later calls do nothing.
func (in *Inbound) Release() {
	in.g.Release()
	in.g = nil
}

// The budget bounds requests once read, but gRPC reads a request whole as
// soon as the stream's reader asks for it, and a stream's reader asks for
// its first request at once: in a storm every new stream's first request,
// the large one, would be read and then wait in memory for the budget, all
// of them at once. So new streams take turns to read their first request:
// a stream reads it only while it holds one of a few leases, given back
// once the request is admitted.
// Until then what a client sent stays, beyond the stream's HTTP/2 receive
// window (GRPCOptions), in the client. A client that opens a stream and
// sends nothing must not hold a lease for long: a lease whose request has
// not arrived lapses after LeaseTime, and the stream then reads as usual.
// Later requests (ACKs, subscription changes) are read at once.

// LeaseTime is how long a first read may hold its lease before its request
// arrives: Envoy sends its first request as soon as the stream is open.
const LeaseTime = time.Second

// FirstReads counts the leases: one per LeaseBytes of the request budget
// (256 for the default), so that the requests read and waiting for the
// budget stay within a few times its size: each leased stream's first
// request, and the second request each stream reads unleased once its
// first was handled (an Envoy's EDS request after CDS). Fewer leases would
// leave the budget idle, since a lease is held while the client uploads
// the rest of its request, a round trip and, for a busy client, longer. A
// nil *FirstReads (a budget worth more than 4096 leases) leases without
// limit.
type FirstReads struct{ slots chan struct{} }

// LeaseBytes is the share of the request budget per lease. A lease is held
// through the upload of a large request by a client that may share the
// CPUs with the rest of its fleet, so a few large shares leave the server
// idle in a reconnect storm and make it slower than without the budgets;
// this share keeps it busy, at the cost of the more requests read and
// waiting in memory that more leases allow.
const LeaseBytes = 64 << 10

// NewFirstReads returns one lease per LeaseBytes of requestBudget (at
// least one), or nil (no limit) past 4096 leases.
func NewFirstReads(requestBudget int) *FirstReads {
	n := max(requestBudget/LeaseBytes, 1)
	if n > 4096 {
		return nil
	}
	return &FirstReads{slots: make(chan struct{}, n)}
}

// Leases is how many first reads may be under way at once.
func (f *FirstReads) Leases() int { return cap(f.slots) }

// Held is how many leases are held.
func (f *FirstReads) Held() int { return len(f.slots) }

// Lease waits for a free lease, or for ctx to end.
func (f *FirstReads) Lease(ctx context.Context) (*ReadLease, error) {
	if f == nil {
		return nil, nil
	}
	select {
	case f.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l := &ReadLease{f: f}
	l.lapse = time.AfterFunc(LeaseTime, l.Release)
	return l, nil
}

// ReadLease is one stream's turn to read its first request.
type ReadLease struct {
	f     *FirstReads
	lapse *time.Timer
	once  sync.Once
}

// arrived stops the lapse: the request is here and waits for admission.
func (l *ReadLease) arrived() {
	if l != nil {
		l.lapse.Stop()
	}
}

// Release gives the lease back; later calls do nothing.
func (l *ReadLease) Release() {
	if l != nil {
		l.once.Do(func() { <-l.f.slots })
	}
}
