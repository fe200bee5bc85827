package xds

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The v3 type URLs the engine orders and treats specially. Any other type is
// served too, after these four, with EDS-like (only-changed) SotW semantics.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

// rank is the make-before-break push order of upserts on ADS (XDS.md):
// clusters, then their endpoints, then listeners, then routes, then
// anything else (rankOther).
func rank(typeURL string) int {
	switch typeURL {
	case ClusterType:
		return 0
	case EndpointType:
		return 1
	case ListenerType:
		return 2
	case RouteType:
		return 3
	}
	return rankOther
}

const rankOther = 4

// breakRank is the order of removals: what refers to a resource goes before
// it, so a listener goes before its route, the route before its cluster,
// and the cluster before its assignment.
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
	}
	return rankOther
}

// fullState reports whether SotW responses of the type must carry every
// subscribed resource, because an absent one is read as deleted.
func fullState(typeURL string) bool { return typeURL == ClusterType || typeURL == ListenerType }

// shortType is the metric label of a type URL.
func shortType(typeURL string) string {
	switch typeURL {
	case ClusterType:
		return "cluster"
	case EndpointType:
		return "endpoint"
	case ListenerType:
		return "listener"
	case RouteType:
		return "route"
	}
	return typeURL[strings.LastIndexByte(typeURL, '.')+1:]
}

// entry is one version of one resource. It is built once per version and
// shared read-only by every client: the marshalled Any and the encoded
// records (encode.go) are never mutated after newEntry returns, so concurrent
// sends only read them.
type entry struct {
	name     string
	version  string // hex of xxhash64 over the deterministic marshal
	any      *anypb.Any
	wire     wire
	size     int
	grpcOnly bool
	// edsName is, for an EDS cluster, the assignment it warms with; a change
	// of the cluster re-sends that assignment.
	edsName string
	// grpc is the variant served to gRPC clients, nil when they get this
	// entry itself (see Resource.GRPC).
	grpc *entry
	// rewritten holds the entry rewritten for non-ADS clients (rewrite.go).
	rewritten rewriteCache
}

var marshal = proto.MarshalOptions{Deterministic: true}

// contentVersion is the version of a resource marshalled deterministically:
// the hex of its xxhash64, the same in every replica and after a restart.
func contentVersion(b []byte) string { return strconv.FormatUint(xxhash.Sum64(b), 16) }

// Version returns the version the server gives m as a resource, for callers
// that show resources without serving them (a dry run).
func Version(m proto.Message) (string, error) {
	b, err := marshal.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("marshalling %s: %w", proto.MessageName(m), err)
	}
	return contentVersion(b), nil
}

// stale stands for "the client holds some version we do not have" (a delta
// initial_resource_versions entry that does not match): it equals no entry.
var stale = &entry{}

func newEntry(r Resource) (*entry, error) {
	if r.Message == nil {
		return nil, fmt.Errorf("building %s %q: nil message", r.Type, r.Name)
	}
	if got := "type.googleapis.com/" + string(proto.MessageName(r.Message)); got != r.Type {
		return nil, fmt.Errorf("building %s %q: message is a %s", r.Type, r.Name, got)
	}
	b, err := marshal.Marshal(r.Message)
	if err != nil {
		return nil, fmt.Errorf("marshalling %s %q: %w", r.Type, r.Name, err)
	}
	v := contentVersion(b)
	w, a := encodeEntry(r.Type, r.Name, v, b)
	e := &entry{
		name:     r.Name,
		version:  v,
		any:      a,
		wire:     w,
		size:     len(b),
		grpcOnly: r.GRPCOnly,
	}
	if c, ok := r.Message.(*clusterv3.Cluster); ok && c.GetType() == clusterv3.Cluster_EDS {
		e.edsName = c.GetEdsClusterConfig().GetServiceName()
		if e.edsName == "" {
			e.edsName = c.GetName()
		}
	}
	if r.GRPC != nil {
		if e.grpc, err = newEntry(Resource{Type: r.Type, Name: r.Name, Message: r.GRPC}); err != nil {
			return nil, fmt.Errorf("gRPC variant: %w", err)
		}
	}
	return e, nil
}

// emptyAssignment is what a SotW EDS client gets for a name still unknown
// after Options.UnknownNameWait: Envoy finishes warming the cluster on it
// (with no endpoints) instead of waiting for initial_fetch_timeout.
func emptyAssignment(name string) *entry {
	e, err := newEntry(Resource{Type: EndpointType, Name: name, Message: &endpointv3.ClusterLoadAssignment{ClusterName: name}})
	if err != nil {
		panic(err) // cannot happen: a fixed, valid message
	}
	return e
}

// same reports whether a client holding h already has e.
func same(h, e *entry) bool {
	return h == e || (h != nil && e != nil && h.version == e.version && h.name == e.name)
}

// slot is one resource name of one type: its current entry and the watches
// that subscribed to it by name. All fields are guarded by Server.mu.
type slot struct {
	name string
	idx  int // dense index within its type, reused after release
	cur  *entry
	subs subscribers
	// tomb keeps a slot that once had an entry alive after its removal, so
	// that a wildcard watch still holding it never sees two slots of one
	// name. The cost is one small struct per name the server ever served:
	// bounded by the server's own history, never by what clients send.
	tomb bool
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
	wild  map[*watch]struct{}
	// cur is the frame of the current entries (scan.go), nil after a
	// change until a scan asks for it.
	cur *frame
	// table is the current entries in immutable chunks, by slot.idx
	// (held.go); touched are the chunks changed since it was published.
	table   atomic.Pointer[[]*heldChunk]
	touched []int
	// watches by watch.idx (nil = free), for subscribers bitmaps.
	watches []*watch
	wfree   []int
	m       *typeMetrics
	// looked is the last shared name list looked up and its slots (see
	// lookup), dropped when a slot is released.
	looked lookedUp
}

type lookedUp struct {
	first *string // &names[0]: keeps the list, so its address is not reused
	slots []*slot
}

// lookup returns the slots of names, a list shared by the codec (isShared),
// when every name has one; nil for any other list, or when a name has no
// slot ("*" has none). It creates no slot. Every client of a homogeneous
// fleet sends the same list of every cluster in its first EDS request, and
// looking up 10,000 names in the slot map for each was a tenth of the
// server's CPU in a cold start; a shared list is immutable, so its slots
// are looked up once and kept until a slot of the type is released, the
// only way a name's slot changes. The answer is read-only. Server.mu held.
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
	}
	return sl
}

// release drops a slot nobody subscribes to or pins and that never had an
// entry.
func (t *typeState) release(sl *slot) {
	if sl.cur == nil && !sl.tomb && sl.pins == 0 && sl.subs.len() == 0 && t.slots[sl.name] == sl {
		delete(t.slots, sl.name)
		t.looked = lookedUp{}
		t.byIdx[sl.idx] = nil
		t.free = append(t.free, sl.idx)
		t.shrink()
	}
}

// shrink returns the memory of released slots: without it a client that
// subscribed to 100,000 invented names would leave some 10 MB behind after
// it left. The free end of the slot table is cut off at once (amortised
// O(1) per slot); the table, the free list and the slot map (Go maps never
// shrink) are reallocated once they are at most a quarter full, which
// costs O(live slots) once per halving or so. Server.mu held.
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
		t.free = slices.DeleteFunc(t.free, func(i int) bool { return i >= n })
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

// total is the size of the type's slot table, for heldSet's dense form.
func (t *typeState) total() int { return int(t.count.Load()) }
