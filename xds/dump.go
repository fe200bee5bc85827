package xds

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/internal/sensitive"
)

// Dump is a view of served resources for the admin API: per type URL, the
// resources sorted by name.
type Dump map[string][]Dumped

// Dumped is one resource of a Dump: its name, its content-hash version and
// the resource as marshalled for the wire.
type Dumped struct {
	Name, Version string
	Resource      *anypb.Any
}

// dump builds a Dump from entries by type URL, their sensitive fields
// (private keys) redacted as Envoy's config dump redacts them.
func dump(byType map[string][]*entry) Dump {
	d := make(Dump, len(byType))
	for url, list := range byType {
		slices.SortFunc(list, func(a, b *entry) int { return cmp.Compare(a.name, b.name) })
		for _, e := range list {
			d[url] = append(d[url], Dumped{Name: e.name, Version: e.version, Resource: redacted(e)})
		}
	}
	return d
}

// redacted is e's resource with its sensitive fields redacted. Only the
// types that can carry TLS material (secrets, and the transport sockets
// of clusters and listeners) are looked at: an assignment or a route
// configuration has no sensitive field, and a dump of every assignment
// must not decode each.
func redacted(e *entry) *anypb.Any {
	switch e.any.GetTypeUrl() {
	case EndpointType, RouteType:
		return e.any
	}
	out, changed := sensitive.Redact(e.any)
	if !changed {
		return e.any
	}
	return out.(*anypb.Any)
}

// Sent returns what the connected streams of node id hold: every resource
// last sent to them and not removed since (their running configuration).
// The streams of a node using one stream per type are merged. It reports
// false when no stream of that node is connected.
func (s *Server) Sent(id string) (Dump, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, found := map[string][]*entry{}, false
	seen := map[*entry]bool{}
	for c := range s.clients {
		if c.node.GetId() != id {
			continue
		}
		found = true
		c.mu.Lock()
		for url, w := range c.watches {
			for e := range w.sent.entries() {
				if !seen[e] {
					seen[e] = true
					d[url] = append(d[url], e)
				}
			}
		}
		c.mu.Unlock()
	}
	return dump(d), found
}

// Current returns every resource the server holds as a client of that class
// (gRPC or not) would receive it with a wildcard subscription of every type.
func (s *Server) Current(grpc bool) Dump {
	s.mu.Lock()
	defer s.mu.Unlock()
	view := &client{nodeInfo: nodeInfo{grpc: grpc}}
	d := map[string][]*entry{}
	for url, t := range s.types {
		for _, sl := range t.slots {
			if e := view.visible(sl.cur); e != nil {
				d[url] = append(d[url], e)
			}
		}
	}
	return dump(d)
}
