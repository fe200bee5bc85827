package xds

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// client is one xDS stream. Its state is split by lock:
//   - index membership (slot.subs, typeState.wild), grpc, closed: Server.mu;
//   - everything a push reads or writes (held, dirty, waiting, nonces,
//     ACK/NACK): client.mu.
//
// Lock order is Server.mu then client.mu. The writer (writer.go) takes
// only client.mu and never holds it while sending, so a
// client blocked by flow control blocks nobody else.
type client struct {
	s *Server
	// variant is the stream's xDS variant (sotw_ads, delta_eds, ...): the
	// label of its metrics and ClientStatus.Variant.
	variant string
	delta   bool
	peer    string
	conn    string // the TCP peer the stream counts against (Server.conns)
	since   time.Time
	// cancel ends the stream (nil for in-process clients); refused is the
	// limit breach or invalid request it ended for (see Server.endStream).
	cancel  context.CancelFunc
	refused atomic.Pointer[refusal]
	// rewrite is the Rewrite the stream is served (nil: ADS); see rewrite.go.
	rewrite *Rewrite

	// Set under Server.mu before the first subscription, then read-only.
	grpc bool
	node *corev3.Node
	// scope is the client's scope ID (0: unscoped) and scopeName its name,
	// set with node and changed only by Server.SetScopes, under Server.mu
	// and client.mu.
	scope     int
	scopeName string
	closed    bool
	gen       uint64 // last Apply generation that touched this client
	// private are the empty stores of type URLs the server does not serve
	// that this stream asked for (Server.storeFor); Server.mu.
	private map[string]*typeState
	// unknown counts the slots pinned by the client's watches (names
	// without a resource), bounded by Limits.UnknownNames; Server.mu.
	unknown int
	// member is the client's place in its Envoy's group of per-type
	// streams (gate.go), set with node; nil on ADS.
	member   *member
	groupKey groupKey

	mu      sync.Mutex
	writer  atomic.Pointer[writer] // set once by startWriter
	watches map[string]*watch
	order   []*watch // by rank: the make-before-break push order
	brk     []*watch // by breakRank: the order of removals
	nonce   uint64
}

// watchFor returns the client's watch of t, creating it. Server.mu and
// client.mu held.
func (c *client) watchFor(t *typeState) *watch {
	if w := c.watches[t.url]; w != nil {
		return w
	}
	w := &watch{
		c:       c,
		t:       t,
		held:    heldSet{t: t, scope: c.scope},
		dirty:   make(map[*slot]pend),
		waiting: make(map[*slot]waitSince),
	}
	t.addWatch(w)
	c.watches[t.url] = w
	c.order = append(c.order, w)
	slices.SortStableFunc(c.order, func(a, b *watch) int { return a.t.rank - b.t.rank })
	c.brk = append(c.brk, w)
	slices.SortStableFunc(c.brk, func(a, b *watch) int { return a.t.brk - b.t.brk })
	return w
}

// poke tells the client's writer to look again; a client without one (not
// yet attached, or driven in process) ignores it.
func (c *client) poke() {
	if w := c.writer.Load(); w != nil {
		w.poke()
	}
}
