package xds

import (
	"context"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// DefaultRequestBudget is Options.RequestBudget when unset.
const DefaultRequestBudget = 16 << 20

// smallRequest is the wire size under which a request never waits for the
// request budget: ACKs and subscription changes of a few names must not
// queue behind a storm of reconnects.
const smallRequest = 64 << 10

// The send budget bounds responses; this one bounds requests. A
// reconnecting Envoy's first requests list every resource it holds
// (initial_resource_versions, several times larger once decoded into a map
// than on the wire), and in a storm every stream's reader decodes its
// request at once, however few CPUs there are to handle them, and then
// queues for the server's lock with the decoded request in hand: the peak
// memory of a storm would grow with the fleet times its resources. Instead a
// large request waits, first come first served, before it is decoded,
// until the wire bytes of the requests being decoded and handled fit in
// Options.RequestBudget; it gives them back once the engine has handled
// it. What a waiting request holds is its wire bytes (gRPC reads a message
// whole before handing it to the codec), the most compact form it has.
//
// The wait needs the engine's codec (Codec): another codec decodes at once.

// inbound is what a stream's reader receives a request into: the request
// and the budget it is admitted by. It is a proto.Message standing for the
// request, so that any codec can decode into it; Codec recognises it and
// first waits for the budget.
type inbound struct {
	msg   proto.Message
	ctx   context.Context // the stream's: its end stops the wait
	admit *budget
	g     *grant // held from before decoding until release
	// lease is the stream's first read's (see firstReads): given back once
	// the request is admitted.
	lease *readLease
	// initial and initialN are a delta request's initial versions when
	// Codec kept them as records (see unmarshalCompact and initialVersions).
	initial  string
	initialN int
}

func (in *inbound) ProtoReflect() protoreflect.Message { return in.msg.ProtoReflect() }

// GetNode is the request's node, for stream interceptors that check it
// (the bridge binds nodes to client certificates) without knowing the
// request's type.
func (in *inbound) GetNode() *corev3.Node {
	if r, ok := in.msg.(interface{ GetNode() *corev3.Node }); ok {
		return r.GetNode()
	}
	return nil
}

// wait admits a request of n wire bytes: at once if it is small, else once
// the budget has room for it (or the stream ended).
func (in *inbound) wait(n int) error {
	in.lease.arrived()
	defer in.lease.release()
	if n < smallRequest || in.admit == nil || in.g != nil {
		return nil
	}
	g, err := in.admit.acquire(in.ctx, n, nil)
	if err != nil {
		return err
	}
	in.g = g
	return nil
}

// release gives the request's bytes back: it has been handled (or
// dropped). Later calls do nothing.
func (in *inbound) release() {
	in.g.release()
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
// not arrived lapses after leaseTime, and the stream then reads as usual.
// Later requests (ACKs, subscription changes) are read at once.

// leaseTime is how long a first read may hold its lease before its request
// arrives: Envoy sends its first request as soon as the stream is open.
const leaseTime = time.Second

// firstReads counts the leases: one per leaseBytes of the request budget
// (256 for the default), so that the requests read and waiting for the
// budget stay within a few times its size: each leased stream's first
// request, and the second request each stream reads unleased once its
// first was handled (an Envoy's EDS request after CDS). Fewer leases would
// leave the budget idle, since a lease is held while the client uploads
// the rest of its request, a round trip and, for a busy client, longer. A
// nil *firstReads (a budget worth more than 4096 leases) leases without
// limit.
type firstReads struct{ slots chan struct{} }

// leaseBytes is the share of the request budget per lease. A lease is held
// through the upload of a large request by a client that may share the
// CPUs with the rest of its fleet, so a few large shares leave the server
// idle in a reconnect storm and make it slower than without the budgets;
// this share keeps it busy, at the cost of the more requests read and
// waiting in memory that more leases allow.
const leaseBytes = 64 << 10

func newFirstReads(requestBudget int) *firstReads {
	n := max(requestBudget/leaseBytes, 1)
	if n > 4096 {
		return nil
	}
	return &firstReads{slots: make(chan struct{}, n)}
}

// lease waits for a free lease, or for ctx to end.
func (f *firstReads) lease(ctx context.Context) (*readLease, error) {
	if f == nil {
		return nil, nil
	}
	select {
	case f.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l := &readLease{f: f}
	l.lapse = time.AfterFunc(leaseTime, l.release)
	return l, nil
}

// readLease is one stream's turn to read its first request.
type readLease struct {
	f     *firstReads
	lapse *time.Timer
	once  sync.Once
}

// arrived stops the lapse: the request is here and waits for admission.
func (l *readLease) arrived() {
	if l != nil {
		l.lapse.Stop()
	}
}

// release gives the lease back; later calls do nothing.
func (l *readLease) release() {
	if l != nil {
		l.once.Do(func() { <-l.f.slots })
	}
}
