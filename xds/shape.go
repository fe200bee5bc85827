package xds

import (
	"fmt"
)

// of returns the entry as clients of rw see it, building it on first use.
// It takes only the entry's own lock, so it is safe under Server.mu and
// client.mu alike; the build (one unmarshal and marshal) happens once per
// version and Rewrite.
func (rw *Rewrite) of(e *entry) *entry {
	if rw == nil || e == nil || e == stale || !rewritable(e.any.TypeUrl) {
		return e
	}
	e.rewritten.mu.Lock()
	defer e.rewritten.mu.Unlock()
	if a, ok := e.rewritten.m[rw]; ok {
		return a
	}
	a, err := rw.build(e)
	if err != nil {
		a = e // cannot happen for a resource that marshalled; serve it as is
	}
	if e.rewritten.m == nil {
		e.rewritten.m = make(map[*Rewrite]*entry, 1)
	}
	e.rewritten.m[rw] = a
	return a
}

// build rewrites the ADS config sources of e's resource; it returns e when
// there are none.
func (rw *Rewrite) build(e *entry) (*entry, error) {
	m, err := e.any.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("decoding %s %q: %w", e.any.TypeUrl, e.name, err)
	}
	changed, err := rw.sources(m.ProtoReflect(), e.edsName)
	if err != nil || !changed {
		return e, err
	}
	return newEntry(Resource{Type: e.any.TypeUrl, Name: e.name, Message: m, GRPCOnly: e.grpcOnly})
}

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
