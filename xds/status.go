package xds

import (
	"cmp"
	"slices"
	"time"
)

// ClientStatus is the state of one connected stream, for the admin API.
type ClientStatus struct {
	// ID and Cluster are the node's id and cluster; UserAgent its
	// user_agent_name. GRPC reports whether it is served gRPC-only resources.
	ID, Cluster, UserAgent string
	GRPC                   bool
	// Variant is sotw_ads, delta_ads, sotw_cds, delta_eds, ...
	Variant   string
	Peer      string
	Connected time.Time
	Types     []TypeStatus
}

// TypeStatus is a stream's state for one resource type.
type TypeStatus struct {
	TypeURL  string
	Wildcard bool
	// Subscribed counts explicit names; Held what the client holds (sent);
	// Pending names changed but not yet sent.
	Subscribed, Held, Pending int
	Pushes                    uint64
	// LastVersion/LastNonce are of the latest response sent, AckedVersion
	// of the latest one ACKed.
	LastVersion, LastNonce, AckedVersion string
	// NACK is the latest rejection, nil if none.
	NACK *NACKStatus
}

// NACKStatus is a response a client rejected.
type NACKStatus struct {
	Version, Nonce, Error string
	At                    time.Time
	// Count is how many NACKs of this type the stream sent so far.
	Count int
}

// Clients returns the state of every connected stream, ordered by node id.
func (s *Server) Clients() []ClientStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ClientStatus, 0, len(s.clients))
	for c := range s.clients {
		c.mu.Lock()
		cs := ClientStatus{
			ID:        c.node.GetId(),
			Cluster:   c.node.GetCluster(),
			UserAgent: c.node.GetUserAgentName(),
			GRPC:      c.grpc,
			Variant:   c.variant,
			Peer:      c.peer,
			Connected: c.since,
		}
		for _, w := range c.order {
			ts := TypeStatus{
				TypeURL:      w.t.url,
				Wildcard:     w.wildcard,
				Pending:      len(w.dirty) + w.pendingScan(),
				Pushes:       w.pushes,
				LastVersion:  w.lastVersion,
				LastNonce:    w.lastNonce,
				AckedVersion: w.acked,
			}
			for sl, h := range w.held.all() {
				if h != nil && h != stale {
					ts.Held++
				}
				if w.explicit(sl) {
					ts.Subscribed++
				}
			}
			if w.nack != nil {
				n := *w.nack
				ts.NACK = &n
			}
			cs.Types = append(cs.Types, ts)
		}
		c.mu.Unlock()
		out = append(out, cs)
	}
	slices.SortFunc(out, func(a, b ClientStatus) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), a.Connected.Compare(b.Connected))
	})
	return out
}

// id names the client in logs. client.mu or Server.mu held.
func (c *client) id() string {
	if id := c.node.GetId(); id != "" {
		return id
	}
	return c.peer
}
