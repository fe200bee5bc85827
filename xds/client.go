package xds

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// client is one xDS stream. Its state is split by owner, each part a
// value inside it:
//
//   - streamInfo: what the stream is, set when it is accepted;
//   - nodeInfo: who is at its other end, from its first request's node;
//   - registration: what the server keeps of it, under Server.mu;
//   - watchSet: its watches, under client.mu, which also guards nonce and
//     everything a push reads or writes (each watch's sent set, pending
//     changes, nonces, ACK/NACK).
//
// Lock order is Server.mu then client.mu. The writer (writer.go) takes
// only client.mu and never holds it while sending, so a client blocked by
// flow control blocks nobody else.
type client struct {
	s *Server
	streamInfo
	nodeInfo
	registration

	mu     sync.Mutex
	writer atomic.Pointer[writer] // set once by startWriter
	watchSet
	nonce uint64 // of the latest response, counting from 1
}

// streamInfo is what a client's stream is. Server.connect sets it, and
// serveStream cancel, before the client is shared; it is read-only after,
// but for refused, which is set once, atomically.
type streamInfo struct {
	// variant is the stream's xDS variant (sotw_ads, delta_eds, ...): the
	// label of its metrics and ClientStatus.Variant.
	variant string
	delta   bool
	peer    string
	conn    string // the TCP peer the stream counts against (registry.conns)
	since   time.Time
	// rewrite is the Rewrite the stream is served (nil: ADS); see rewrite.go.
	rewrite *Rewrite
	// cancel ends the stream (nil for in-process clients); refused is the
	// limit breach or invalid request it ended for (see client.refuse).
	cancel  context.CancelFunc
	refused atomic.Pointer[refusal]
}

// nodeInfo is who is at the other end of a client's stream, as its first
// request's node says (client.identify): set under Server.mu and client.mu
// before the first subscription, then read-only but for the scope, which
// only Server.SetScopes changes, under both locks.
type nodeInfo struct {
	node *corev3.Node
	// grpc: the node is a proxyless gRPC client (it is served the
	// gRPC-only resources).
	grpc bool
	// scope is the client's scope ID (0: unscoped) and scopeName its name.
	scope     int
	scopeName string
}

// registration is what the server keeps of a client, guarded by
// Server.mu.
type registration struct {
	// closed: the stream ended (Server.disconnect); a request handled
	// after that does nothing.
	closed bool
	// gen is the generation of the last Apply that collected the client
	// to poke (see fanout).
	gen uint64
	// private are the empty stores of type URLs the server does not serve
	// that this stream asked for (client.storeFor).
	private map[string]*typeState
	// unknown counts the slots pinned by the client's watches (names
	// without a resource), bounded by Limits.UnknownNames.
	unknown int
	// member is the client's place in its Envoy's group of per-type
	// streams (gate.go), set with node, and groupKey the group's; nil on
	// ADS.
	member   *member
	groupKey groupKey
}

// collect reports whether the Apply of generation gen has yet to collect
// the client, and records that it has now. Server.mu held.
func (r *registration) collect(gen uint64) bool {
	if r.gen == gen {
		return false
	}
	r.gen = gen
	return true
}

// watchSet is a client's watches, guarded by client.mu (and changed under
// Server.mu too): by type URL, and in the two orders its writer takes them
// in.
type watchSet struct {
	watches map[string]*watch
	order   []*watch // by rank: the make-before-break push order
	brk     []*watch // by breakRank: the order of removals
}

// add adds w, the watch of a type the set has none of.
func (ws *watchSet) add(w *watch) {
	ws.watches[w.t.url] = w
	ws.order = append(ws.order, w)
	slices.SortStableFunc(ws.order, func(a, b *watch) int { return a.t.rank - b.t.rank })
	ws.brk = append(ws.brk, w)
	slices.SortStableFunc(ws.brk, func(a, b *watch) int { return a.t.brk - b.t.brk })
}

// visible hides gRPC-only resources from clients that are not gRPC, gives
// gRPC clients the gRPC variant where there is one (as Resource.For), and
// gives a client that is not on ADS the entry as its Rewrite rewrites it.
func (c *client) visible(e *entry) *entry { return shape(e, c.grpc, c.rewrite) }

// writer sends a stream's responses from a goroutine that exists only while
// the client is owed something. A poke (a change, a request, an
// unknown-name deadline) starts one unless one is running, in which case
// that one looks again before it exits; once it finds nothing to send it
// arms the next deadline and exits. An idle stream therefore holds no
// writer goroutine: a parked writer per stream would be a stack per
// connected client that the process keeps for nothing, while starting a
// goroutine per push costs no measurable CPU.
//
// At most one goroutine sends at a time, so the stream's SendMsg is never
// called concurrently; stop waits for it, so none is called after the
// stream's handler returns.
type writer struct {
	c      *client
	ctx    context.Context
	cancel context.CancelFunc // ends the stream when a send fails
	send   func(*outbound) error

	mu      sync.Mutex
	idle    sync.Cond // signalled when a run ends
	running bool
	again   bool // poked while running: look again before exiting
	stopped bool
	err     error       // the send that failed
	timer   *time.Timer // pokes at the next unknown-name deadline
	// grants are the send budget shares of responses still in flight;
	// the transport returns each once written, stop returns the rest.
	// Only the run under way touches them, and stop once none is (the
	// hand-over from one run to the next, and to stop, is under mu).
	grants []*wire.Grant

	// afterDrain, when set (by tests, only while no run is under way),
	// runs between a run's last look and its exit: where a poke must not
	// be lost.
	afterDrain func()
}

// groupKey identifies the per-type streams of one Envoy.
type groupKey struct{ peer, node string }

// group is the per-type streams of one Envoy, guarded by mu.
type group struct {
	s       *Server
	mu      sync.Mutex
	members []*member
}

// member is one per-type stream of a group and what it publishes to the
// others, guarded by group.mu.
type member struct {
	g   *group
	c   *client
	url string // the type the stream serves
	// acked are, for a CDS or EDS stream, the slots whose delivery it has
	// acknowledged, by slot index: a slot, not a bit, so that a slot
	// released and its index reused by another name is not taken for it.
	acked slotSet
	// wildcard says a CDS stream subscribes to every cluster.
	wildcard bool
	// refs counts, for an LDS or RDS stream, the clusters named by the
	// entries it was sent, and by those it replaced or removed until it
	// acknowledges that.
	refs map[string]int
	// blocked says its writer is deferring something for the group.
	blocked atomic.Bool
}

// gateNotes are what a member's watch sent since its client last
// acknowledged a response of the type, to publish to the group once it
// does: fresh are the slots a CDS or EDS stream was sent for the first
// time, unacked the cluster names of the entries an LDS or RDS stream
// replaced or removed. Guarded by client.mu; empty on ADS.
type gateNotes struct {
	fresh   map[*slot]struct{}
	unacked [][]string
}

// watch is a client's subscription to one type. Its state is split by
// owner, each part a value inside it:
//
//   - subscription: what the client asked for (subscription.go);
//   - sent: what the client holds, what it was sent (sent.go);
//   - pending: what the client is owed and not yet sent (pending.go);
//   - ackState: the responses sent and what the client answered (acks.go);
//   - gateNotes: what a per-type stream has yet to acknowledge, for the
//     make-before-break gate (gate.go).
//
// The watch's own methods are what ties them together: a subscription
// change queues what the client is owed, a response records what it
// holds. idx and pins are the type's and the slots' references to it,
// guarded by Server.mu; the rest is guarded by client.mu (and written
// under Server.mu too where the parts' comments say).
type watch struct {
	c   *client
	t   *typeState
	idx int // in t.watches; Server.mu
	// pins are the slots without an entry this watch references (see
	// slot.pins); Server.mu.
	pins map[*slot]struct{}
	subscription
	sent sentSet
	pending
	ackState
	gateNotes
}
