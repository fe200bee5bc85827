package xds

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
	// The types that JSON encoding must resolve inside Anys.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// This file is the engine's API for views: deliveries of the store other
// than gRPC streams (REST-JSON polling, watched files). A view reads the
// store when it is asked (Select) or when it changes (Changes, Snapshot);
// the store stays the one truth, and a view serves the very entries, and
// versions, the streams serve.

// Item is one resource as a view delivers it.
type Item struct {
	Name string
	// Version is the resource's content-hash version, as in delta xDS.
	Version string
	// Resource is shared with every client: never modify it.
	Resource *anypb.Any
}

// View says how a view's clients see the store.
type View struct {
	// Rewrite rewrites the ADS config sources of clusters and gRPC
	// listeners for clients that do not use ADS; nil keeps them.
	Rewrite *Rewrite
	// GRPC serves the gRPC-only resources (the proxyless chain).
	GRPC bool
}

// VersionOf is the version of a list of items: a hash of their names and
// versions in order. Equal content has equal versions everywhere, so a
// poller can be answered "not modified" by any replica.
func VersionOf(items []Item) string {
	d := xxhash.New()
	for _, it := range items {
		_, _ = d.WriteString(it.Name)
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(it.Version)
		_, _ = d.Write([]byte{0})
	}
	return strconv.FormatUint(d.Sum64(), 16)
}

// Select returns, ordered by name, the resources of typeURL that a client
// of view v sees: those named (names it does not have are left out), or all
// of them when names is empty. ok is false before the first Apply: like the
// streams, a view must serve nothing before the first full state.
func (s *Server) Select(typeURL string, names []string, v View) (items []Item, ok bool) {
	if !s.Ready() {
		return nil, false
	}
	s.mu.Lock()
	es := s.types[typeURL].collect(names, nil)
	s.mu.Unlock()
	return v.items(es), true
}

// Snapshot returns every resource of each type in typeURLs as one state (no
// Apply lands between the types), each ordered by name; ok is false before
// the first Apply.
func (s *Server) Snapshot(v View, typeURLs ...string) (map[string][]Item, bool) {
	if !s.Ready() {
		return nil, false
	}
	all := make([][]*entry, len(typeURLs))
	s.mu.Lock()
	for i, typ := range typeURLs {
		all[i] = s.types[typ].collect(nil, nil)
	}
	s.mu.Unlock()
	out := make(map[string][]Item, len(typeURLs))
	for i, typ := range typeURLs {
		out[typ] = v.items(all[i])
	}
	return out, true
}

// collect appends the current entries of the named (or all) resources of
// the type, private ones left out; a nil store (a type the server never
// had) appends none. Server.mu held.
func (t *typeState) collect(names []string, es []*entry) []*entry {
	if t == nil {
		return es
	}
	// Views serve clients the engine cannot tell apart (a REST poller, a
	// directory), so they never serve a private resource.
	if len(names) == 0 {
		for _, sl := range t.byIdx.all() {
			if sl.cur != nil && !sl.cur.private {
				es = append(es, sl.cur)
			}
		}
		return es
	}
	for _, n := range names {
		if sl := t.slots[n]; sl != nil && sl.cur != nil && !sl.cur.private {
			es = append(es, sl.cur)
		}
	}
	return es
}

// items turns entries into what v's clients see, ordered by name, each
// name once. It runs without Server.mu: rewriting a resource takes time.
func (v View) items(es []*entry) []Item {
	out := make([]Item, 0, len(es))
	for _, e := range es {
		if e = shape(e, v.GRPC, v.Rewrite); e == nil {
			continue
		}
		out = append(out, Item{Name: e.name, Version: e.version, Resource: e.any})
	}
	slices.SortFunc(out, func(a, b Item) int { return cmp.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b Item) bool { return a.Name == b.Name })
}

// Generation counts the Applies that changed resources of typeURL (0 until
// the first). A view that caches what it built from a type can compare it
// instead of reading the store again.
func (s *Server) Generation(typeURL string) uint64 {
	s.views.mu.Lock()
	defer s.views.mu.Unlock()
	return s.views.gen[typeURL]
}

// Changes returns a channel that receives after every Apply that changed
// something (and after the first Apply), coalesced: a reader that is busy
// gets one signal for any number of changes. stop releases it.
func (s *Server) Changes() (c <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	s.views.mu.Lock()
	if s.views.subs == nil {
		s.views.subs = make(map[chan struct{}]struct{})
	}
	s.views.subs[ch] = struct{}{}
	s.views.mu.Unlock()
	if s.Ready() {
		ch <- struct{}{}
	}
	return ch, func() {
		s.views.mu.Lock()
		delete(s.views.subs, ch)
		s.views.mu.Unlock()
	}
}

// RecordNACK counts and logs a response that a view's client rejected, as
// the streams do for theirs (xdsbridge_xds_nacks_total{type}); typeURL must
// be one of the four served types.
func (s *Server) RecordNACK(typeURL, client, version, msg string) {
	s.m.nacks.WithLabelValues(shortType(typeURL)).Inc()
	s.log.Warn("client rejected a response", "client", client, "type", typeURL, "version", version, "error", msg)
}

// jsonOptions write what Envoy reads from REST responses and watched
// files: the proto field names of its documentation, Anys with @type.
var jsonOptions = protojson.MarshalOptions{UseProtoNames: true}

// ResponseJSON is the JSON DiscoveryResponse carrying items as version
// version: the body of a REST-JSON answer and the content of a watched file.
func ResponseJSON(typeURL, version string, items []Item) ([]byte, error) {
	r := &discoveryv3.DiscoveryResponse{VersionInfo: version, TypeUrl: typeURL, Resources: make([]*anypb.Any, len(items))}
	for i, it := range items {
		r.Resources[i] = it.Resource
	}
	b, err := jsonOptions.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding %s response as JSON: %w", typeURL, err)
	}
	return b, nil
}
