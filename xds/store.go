package xds

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
)

// The v3 type URLs the engine orders and treats specially. Any other type is
// served too, after these five, with EDS-like (only-changed) SotW semantics,
// unless it is one of Options.Collections.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	SecretType   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// rank is the make-before-break push order of upserts on ADS (see doc.go):
// clusters, then their endpoints, then secrets (which listeners and
// clusters name), then listeners, then routes, then anything else
// (rankOther).
func rank(typeURL string) int {
	switch typeURL {
	case ClusterType:
		return 0
	case EndpointType:
		return 1
	case SecretType:
		return 2
	case ListenerType:
		return 3
	case RouteType:
		return 4
	}
	return rankOther
}

const rankOther = 5

// breakRank is the order of removals: what refers to a resource goes before
// it, so a listener goes before its route, the route before its cluster,
// the cluster before its assignment, and a secret after the listeners and
// clusters that name it.
func breakRank(typeURL string) int {
	switch typeURL {
	case ListenerType:
		return 0
	case RouteType:
		return 1
	case ClusterType:
		return 2
	case EndpointType:
		return 3
	case SecretType:
		return 4
	}
	return rankOther
}

// fullState reports whether SotW responses of the type must carry every
// subscribed resource, because an absent one is read as deleted (the
// collections of Options.Collections too; NewServer marks them).
func fullState(typeURL string) bool { return typeURL == ClusterType || typeURL == ListenerType }

// messagePrefix starts the type URL of a protobuf message. A type without
// it is a collection name, such as MCP's networking.istio.io/v1/ServiceEntry,
// whose resources are Anys of their own message type.
const messagePrefix = "type.googleapis.com/"

// shortType is the metric label of a type URL: a message's last name
// element, a collection's last path element (ServiceEntry).
func shortType(typeURL string) string {
	if !strings.HasPrefix(typeURL, messagePrefix) {
		return typeURL[strings.LastIndexByte(typeURL, '/')+1:]
	}
	switch typeURL {
	case ClusterType:
		return "cluster"
	case EndpointType:
		return "endpoint"
	case ListenerType:
		return "listener"
	case RouteType:
		return "route"
	case SecretType:
		return "secret"
	}
	return typeURL[strings.LastIndexByte(typeURL, '.')+1:]
}

// slot is one resource name of one type: its current entry and the watches
// that subscribed to it by name. All fields but owed are guarded by
// Server.mu.
//
// A slot lives while something references it: an entry, a watch
// subscribed to it by name, a watch that pins it (a name without an entry
// the client asked for), or a watch owed its removal. A slot without any
// is released (typeState.release), so the store holds what it serves and
// what its clients still reference, never every name it ever served. A
// name that comes back gets a new slot, likely at another index: nothing
// may keep a slot or its index past its release, which is what owed
// guards for the watches that held the entry.
type slot struct {
	name string
	idx  int // dense index within its type, reused after release
	cur  *entry
	subs subscribers
	// owed counts the watches whose pending changes hold this slot's
	// removal (a pend without an entry, watch.mark): their clients hold,
	// or were about to be sent, what the slot had, and their held sets
	// know the slot by its index until the removal is sent. It grows only
	// under Server.mu and client.mu (mark); a writer decrements it holding
	// client.mu alone, when it sends the removal, and queues the slot for
	// release if it was the last (Server.orphan).
	owed atomic.Int32
	// pins counts the watches that reference this slot while it has no
	// entry (a name a client subscribed to or claimed that the server does
	// not have): it stays until the last of them lets go (watch.sweep) or
	// disconnects, and is then released.
	pins int
}

// typeState is the store and the subscriber index of one type, guarded by
// Server.mu.
type typeState struct {
	url   string
	rank  int
	brk   int // breakRank
	full  bool
	slots map[string]*slot
	byIdx []*slot // by slot.idx; nil = free
	free  []int
	count atomic.Int64 // len(byIdx), readable by writers without Server.mu
	peak  int          // most slots since the last compact
	// wild are the wildcard watches by their client's scope ID (0:
	// unscoped), so that a change is marked only on the wildcards of the
	// scopes it is in (Server.markSubscribers).
	wild map[int]map[*watch]struct{}
	// cachedFrames are the frames of the current entries (scan.go) by scope ID,
	// nil after a change until a scan asks for one.
	cachedFrames []*frame
	// table is the current entries in immutable chunks, by slot.idx
	// (held.go), and scoped the same per scope; touched are the chunks
	// changed since they were published. seen are the scopes any entry of
	// the type was ever in or denied to: those that have tables.
	table   atomic.Pointer[[]*heldChunk]
	scoped  atomic.Pointer[scopeTables]
	touched []int
	seen    ScopeSet
	// watches by watch.idx (nil = free), for subscribers bitmaps.
	watches []*watch
	wfree   []int
	m       *typeMetrics
	// looked is the last shared name list looked up and its slots (see
	// lookup), dropped when a slot is released.
	looked lookedUp
	// index maps names to slots like slots, for writers, which hold only
	// client.mu; kept for the cluster and assignment stores only
	// (indexed), which the make-before-break gate reads.
	index sync.Map
}

type lookedUp struct {
	first *string // &names[0]: keeps the list, so its address is not reused
	slots []*slot
}

// lookup returns the slots of names, a list shared by the codec (isShared),
// when every name has one; nil for any other list, or when a name has no
// slot ("*" has none). It creates no slot. Every client of a homogeneous
// fleet sends the same list of every cluster in its first EDS request, and
// looking up every name of it in the slot map for each client would be a
// good share of the server's CPU in a cold start; a shared list is
// immutable, so its slots are looked up once and kept until a slot of the
// type is released, the only way a name's slot changes. The answer is
// read-only. Server.mu held.
func (t *typeState) lookup(names []string) []*slot {
	if !isShared(names) {
		return nil
	}
	if l := t.looked; len(l.slots) == len(names) && l.first == &names[0] {
		return l.slots
	}
	slots := make([]*slot, len(names))
	for i, n := range names {
		if slots[i] = t.slots[n]; slots[i] == nil {
			return nil
		}
	}
	t.looked = lookedUp{first: &names[0], slots: slots}
	return slots
}

// slotOf is the slot of names[i], from slots (lookup's answer) if not nil,
// else found or created. Server.mu held.
func (t *typeState) slotOf(slots []*slot, names []string, i int) *slot {
	if slots != nil {
		return slots[i]
	}
	return t.get(names[i])
}

func (t *typeState) get(name string) *slot {
	sl := t.slots[name]
	if sl == nil {
		// A copy: a request's names may share one buffer (see Codec).
		sl = &slot{name: strings.Clone(name), idx: len(t.byIdx)}
		// The free list may hold indexes cut off by shrink, or taken again
		// since: skip them.
		for n := len(t.free); n > 0 && (t.free[n-1] >= len(t.byIdx) || t.byIdx[t.free[n-1]] != nil); n-- {
			t.free = t.free[:n-1]
		}
		if n := len(t.free); n > 0 {
			sl.idx, t.free = t.free[n-1], t.free[:n-1]
			t.byIdx[sl.idx] = sl
		} else {
			t.byIdx = append(t.byIdx, sl)
			t.count.Store(int64(len(t.byIdx)))
		}
		t.slots[name] = sl
		t.peak = max(t.peak, len(t.slots))
		if indexed(t.url) {
			t.index.Store(sl.name, sl)
		}
	}
	return sl
}

// release drops sl if nothing references it (see slot): no entry, no
// subscriber, pin or owed removal. Server.mu held.
func (t *typeState) release(sl *slot) {
	if sl.cur == nil && sl.pins == 0 && sl.owed.Load() == 0 && sl.subs.len() == 0 && t.slots[sl.name] == sl {
		delete(t.slots, sl.name)
		if indexed(t.url) {
			t.index.CompareAndDelete(sl.name, sl)
		}
		t.looked = lookedUp{}
		t.byIdx[sl.idx] = nil
		t.free = append(t.free, sl.idx)
		t.shrink()
	}
}

// An orphan is a slot whose last owed removal a writer sent: writers hold
// only client.mu, so they queue it, and it is released under Server.mu by
// the writer once it has nothing left to send (Server.releaseOrphans), or
// by the next Apply, whichever comes first.
type orphan struct {
	t  *typeState
	sl *slot
}

// orphan queues sl of t for release. It takes only Server.orphanMu.
func (s *Server) orphan(t *typeState, sl *slot) {
	s.orphanMu.Lock()
	s.orphans = append(s.orphans, orphan{t, sl})
	s.orphaned.Store(true)
	s.orphanMu.Unlock()
}

// releaseOrphans releases the queued slots that nothing references any
// more (a slot may have been given an entry, or been claimed, since it was
// queued). Server.mu held.
func (s *Server) releaseOrphans() {
	if !s.orphaned.Load() {
		return
	}
	s.orphanMu.Lock()
	q := s.orphans
	s.orphans = nil
	s.orphaned.Store(false)
	s.orphanMu.Unlock()
	for _, o := range q {
		o.t.release(o.sl)
	}
}

// reapOrphans takes Server.mu to release the queued orphans, if there are
// any: every writer looks when it runs out of work, so the look is one
// atomic load. No lock held.
func (s *Server) reapOrphans() {
	if s.orphaned.Load() {
		s.mu.Lock()
		s.releaseOrphans()
		s.mu.Unlock()
	}
}

// shrink returns the memory of released slots: without it a client that
// subscribed to many invented names, or a registry that shrank, would
// leave their memory behind. The free end of the slot table is cut off at
// once (amortised O(1) per slot); the table, the free list and the slot
// map (Go maps never shrink) are reallocated once they are at most a
// quarter full, which costs O(live slots) once per halving or so. The
// free list keeps the indexes the cut took off (and those taken again
// since) until it is more than twice as long as there are free indexes,
// and is then made again from the table. Server.mu held.
func (t *typeState) shrink() {
	n := len(t.byIdx)
	for n > 0 && t.byIdx[n-1] == nil {
		n--
	}
	t.byIdx = t.byIdx[:n]
	t.count.Store(int64(n))
	const small = 1024
	if c := cap(t.byIdx); c > small && n < c/4 {
		t.byIdx = slices.Clone(t.byIdx)
	}
	if free := n - len(t.slots); len(t.free) > small && len(t.free) > 2*free {
		t.free = make([]int, 0, free)
		for i := n - 1; i >= 0; i-- {
			if t.byIdx[i] == nil {
				t.free = append(t.free, i)
			}
		}
	}
	if c := cap(t.free); c > small && len(t.free) < c/4 {
		t.free = slices.Clone(t.free)
	}
	if live := len(t.slots); t.peak > small && live < t.peak/4 {
		m := make(map[string]*slot, live)
		for name, sl := range t.slots {
			m[name] = sl
		}
		t.slots, t.peak = m, live
	}
}

// addWild adds the wildcard watch w to the wildcards of its client's
// scope. Server.mu and client.mu held.
func (t *typeState) addWild(w *watch) {
	ws := t.wild[w.c.scope]
	if ws == nil {
		ws = make(map[*watch]struct{})
		t.wild[w.c.scope] = ws
	}
	ws[w] = struct{}{}
}

// dropWild removes w from the wildcards. Server.mu and client.mu held.
func (t *typeState) dropWild(w *watch) {
	if ws := t.wild[w.c.scope]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(t.wild, w.c.scope)
		}
	}
}

// total is the size of the type's slot table, for heldSet's dense form.
func (t *typeState) total() int { return int(t.count.Load()) }

// typeFor returns the store of a type, creating it. Only Apply and the four
// standard types create stores: a type URL a client invents never becomes
// server state (see storeFor). Server.mu held.
func (s *Server) typeFor(url string) *typeState {
	t := s.types[url]
	if t == nil {
		t = newTypeState(url, s.m.forType(shortType(url)))
		s.types[url] = t
	}
	return t
}

func newTypeState(url string, m *typeMetrics) *typeState {
	return &typeState{
		url:   url,
		rank:  rank(url),
		brk:   breakRank(url),
		full:  fullState(url),
		slots: make(map[string]*slot),
		wild:  make(map[int]map[*watch]struct{}),
		m:     m,
	}
}

// storeFor returns the store a client's request of typ works on: the
// server's store of a served type, else a private empty store of the
// client's own, which lives as long as the stream, so that the request is
// answered like any other for names that do not exist. Server.mu held.
func (s *Server) storeFor(c *client, typ string) (*typeState, *refusal) {
	if t := s.types[typ]; t != nil || rank(typ) < rankOther {
		return s.typeFor(typ), nil
	}
	if t := c.private[typ]; t != nil {
		return t, nil
	}
	if len(c.private) >= maxUnknownTypes {
		return nil, newRefusal(reasonUnknownTypes, codes.InvalidArgument,
			"type_url %q is not served, and this stream already asked for %d such types", typ, maxUnknownTypes)
	}
	if c.private == nil {
		c.private = make(map[string]*typeState)
	}
	t := newTypeState(typ, s.m.unknownType)
	c.private[typ] = t
	return t, nil
}
