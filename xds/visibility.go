package xds

import (
	"math/bits"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

// For returns the message a client of that class receives, and false if
// the resource is hidden from it. It is the rule the engine applies to
// every client, for callers that show what a client would get.
func (r Resource) For(grpc bool) (proto.Message, bool) {
	switch {
	case r.GRPCOnly && !grpc:
		return nil, false
	case grpc && r.GRPC != nil:
		return r.GRPC, true
	}
	return r.Message, true
}

// ForNode is For for the client class of node n: the rule the engine
// applies to a stream of that node by its user_agent_name (gRPC or not).
// A node's scope is applied by the caller (see Server.SetScopes).
func (r Resource) ForNode(n *corev3.Node) (proto.Message, bool) {
	return r.For(isGRPC(n))
}

// InScope reports whether a wildcard subscription of a client of scope id
// (0: unscoped) delivers r: the rule the engine applies (see Scoper). A
// private resource goes only to its scopes, by wildcard or by name.
func (r Resource) InScope(id int) bool {
	return (id == 0 && !r.Private) || r.Scopes.Has(id) && !r.Denied.Has(id)
}

// IsGRPC reports whether a node identifies as a proxyless gRPC client, the
// rule the streams use to decide whether to serve gRPC-only resources.
func IsGRPC(n *corev3.Node) bool { return isGRPC(n) }

func isGRPC(n *corev3.Node) bool {
	return strings.Contains(strings.ToLower(n.GetUserAgentName()), "grpc")
}

// visible hides gRPC-only resources from clients that are not gRPC, gives
// gRPC clients the gRPC variant where there is one (as Resource.For), and
// gives a client that is not on ADS the entry as its Rewrite rewrites it.
func (c *client) visible(e *entry) *entry { return shape(e, c.grpc, c.rewrite) }

// shape is e as a client sees it, nil if hidden: gRPC-only resources only
// for gRPC clients, which get the gRPC shape of a resource when it has one,
// and rewritten by the client's Rewrite. The streams and the views share
// this rule.
func shape(e *entry, grpc bool, rw *Rewrite) *entry {
	switch {
	case e == nil:
		return nil
	case e.grpcOnly && !grpc:
		return nil
	case grpc && e.grpc != nil:
		e = e.grpc
	}
	return rw.of(e)
}

// MaxScopes is the number of scopes the engine tells apart (IDs 1 to
// MaxScopes; 0 is unscoped): a scope is a bit of every resource's
// ScopeSet.
const MaxScopes = 64

// ScopeSet is a set of scope IDs, 1 to MaxScopes.
type ScopeSet uint64

// With returns s with scope id added; an ID out of range adds nothing.
func (s ScopeSet) With(id int) ScopeSet {
	if id < 1 || id > MaxScopes {
		return s
	}
	return s | 1<<(id-1)
}

// Has reports whether scope id is in s.
func (s ScopeSet) Has(id int) bool { return id >= 1 && id <= MaxScopes && s&(1<<(id-1)) != 0 }

// maxID is the largest ID in s, 0 if none.
func (s ScopeSet) maxID() int { return 64 - bits.LeadingZeros64(uint64(s)) }

// Scoper tells the engine which scope a node is in: its ID (0: unscoped,
// served every resource as without scopes; else 1 to MaxScopes) and the
// name the admin API shows. It is called once per stream, when its node
// is known, and for every stream by SetScopes; it must be fast and
// deterministic.
type Scoper func(n *corev3.Node) (id int, name string)

// SetScopes sets how nodes map to scopes (nil: every node unscoped). Each
// connected stream whose scope changes is sent only the difference: the
// resources its new scope delivers by wildcard that it lacks, and the
// removal of those it holds that the scope no longer delivers. Resources'
// own scopes change with Apply (Resource.Scopes), which likewise sends
// each client the difference. A client whose scope changes costs a pass
// over the types it watches under the server's lock: a reload's cost, not
// a push's.
func (s *Server) SetScopes(f Scoper) {
	if f == nil {
		s.scoper.Store(nil)
	} else {
		s.scoper.Store(&f)
	}
	now := time.Now()
	s.mu.Lock()
	var touched []*client
	for c := range s.clients {
		if c.node == nil {
			continue // scoped with its first request
		}
		id, name := s.scopeOf(c.node)
		c.mu.Lock()
		c.scopeName = name
		if id != c.scope {
			c.rescope(id, now)
			touched = append(touched, c)
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
	for _, c := range touched {
		c.poke()
	}
}

// scopeOf is the scope of node n by the current Scoper.
func (s *Server) scopeOf(n *corev3.Node) (int, string) {
	f := s.scoper.Load()
	if f == nil {
		return 0, ""
	}
	id, name := (*f)(n)
	if id < 0 || id > MaxScopes {
		return 0, name
	}
	return id, name
}

// inScope reports whether a wildcard of scope id delivers e: every entry
// but the private ones for the unscoped, else those in the scope and not
// denied to it.
func (e *entry) inScope(id int) bool {
	return (id == 0 && !e.private) || e.scopes.Has(id) && !e.denied.Has(id)
}

// reaches reports whether e (nil: none) is in scope id.
func (e *entry) reaches(id int) bool { return e != nil && e.scopes.Has(id) }

// visible is e, sl's entry in the store, as the watch's client sees it,
// nil if hidden: an entry denied to the client's scope, or private and not
// granted to it, is hidden always, one outside its scope from a wildcard
// subscription only, so that a name the client asks for is served whatever
// its scope; then client.visible.
// Both locks, or client.mu, held.
func (w *watch) visible(sl *slot, e *entry) *entry {
	if id := w.c.scope; e != nil && !e.inScope(id) {
		if e.denied.Has(id) || e.private {
			return nil
		}
		if w.wildcard {
			if _, named := w.named[sl]; !named {
				return nil
			}
		}
	}
	return w.c.visible(e)
}

// rescope moves the client to scope id and queues the difference on each
// watch. Server.mu and client.mu held.
func (c *client) rescope(id int, now time.Time) {
	for _, w := range c.watches {
		if w.wildcard {
			w.t.dropWild(w)
		}
	}
	c.scope = id
	for _, w := range c.watches {
		w.held.scope = id
		if w.wildcard {
			w.t.addWild(w)
		}
		w.rescope(now)
	}
}

// rescope compares the watch with its client's new scope: a wildcard
// gains the resources the scope delivers and loses those it no longer
// does; every watch loses the resources now denied to it. Both locks
// held.
func (w *watch) rescope(now time.Time) {
	if !w.wildcard {
		for sl := range w.held.all() {
			w.reconcile(sl, now)
		}
	} else {
		for _, sl := range w.t.byIdx {
			if sl == nil || sl.cur == nil {
				continue
			}
			h, held := w.held.get(sl)
			switch want := w.visible(sl, sl.cur); {
			case want != nil && !held:
				w.held.put(sl, nil)
				w.mark(sl, sl.cur, false)
			case want == nil && h != nil:
				w.mark(sl, nil, false)
			case want == nil && held:
				w.held.del(sl) // subscribed through the wildcard, never sent
				delete(w.waiting, sl)
			}
		}
	}
	if w.scan != nil {
		w.rescan()
	}
}
