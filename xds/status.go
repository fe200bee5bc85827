package xds

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// MaxStatusNames bounds the subscribed names a TypeStatus lists: a client
// may subscribe to tens of thousands, and the admin API shows what one
// looks like, not all of them (Subscribed has the count).
const MaxStatusNames = 100

// ClientStatus is the state of one connected stream, for the admin API
// (its JSON form is what /clients serves).
type ClientStatus struct {
	// ID and Cluster are the node's id and cluster; UserAgent its
	// user_agent_name. GRPC reports whether it is served gRPC-only resources.
	ID        string `json:"id"`
	Cluster   string `json:"cluster"`
	UserAgent string `json:"user_agent,omitempty"`
	GRPC      bool   `json:"grpc"`
	// Scope names the scope the node is in (see Server.SetScopes); empty
	// when it is unscoped and gets every resource.
	Scope string `json:"scope,omitempty"`
	// Variant is sotw_ads, delta_ads, sotw_cds, delta_eds, ...
	Variant   string       `json:"variant"`
	Peer      string       `json:"peer"`
	Connected time.Time    `json:"connected"`
	Types     []TypeStatus `json:"types"`
}

// TypeStatus is a stream's state for one resource type.
type TypeStatus struct {
	TypeURL  string `json:"type_url"`
	Wildcard bool   `json:"wildcard"`
	// Subscribed counts explicit names and Names lists the first
	// MaxStatusNames of them in sorted order; Held counts what the client
	// was sent and still has; Pending the names changed but not yet sent.
	Subscribed int      `json:"subscribed"`
	Names      []string `json:"names,omitempty"`
	Held       int      `json:"held"`
	Pending    int      `json:"pending"`
	Pushes     uint64   `json:"pushes"`
	// LastVersion/LastNonce are of the latest response sent, AckedVersion
	// of the latest one ACKed.
	LastVersion  string `json:"sent_version"`
	LastNonce    string `json:"sent_nonce"`
	AckedVersion string `json:"acked_version"`
	// NACK is the latest rejection, nil if none.
	NACK *NACKStatus `json:"last_nack,omitempty"`
}

// Lag is how many responses the client has not ACKed: a stream's versions
// are counters of the responses sent on it, so the difference of the latest
// sent and the latest ACKed one counts them. A version that is not such a
// counter (another server's, say) counts as no lag.
func (t TypeStatus) Lag() int {
	s, a, ok := t.versions()
	if !ok || s < a {
		return 0
	}
	return s - a
}

// NACKing reports whether the latest response the client answered was
// rejected: its last NACK is of a version newer than its last ACK.
func (t TypeStatus) NACKing() bool {
	if t.NACK == nil {
		return false
	}
	n, err := strconv.Atoi(t.NACK.Version)
	_, a, ok := t.versions()
	return err == nil && ok && n > a
}

// versions parses the sent and ACKed counters; nothing ACKed yet is 0.
func (t TypeStatus) versions() (sent, acked int, ok bool) {
	s, err1 := strconv.Atoi(t.LastVersion)
	a, err2 := strconv.Atoi(cmp.Or(t.AckedVersion, "0"))
	return s, a, err1 == nil && err2 == nil
}

// Node returns the node of a connected stream of id, as its first request
// described it.
func (s *Server) Node(id string) (*corev3.Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		if c.node.GetId() == id {
			return c.node, true
		}
	}
	return nil, false
}

// Clients returns the state of every connected stream, ordered by node id.
func (s *Server) Clients() []ClientStatus {
	s.mu.Lock()
	out := s.registry.statuses(true)
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b ClientStatus) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), a.Connected.Compare(b.Connected))
	})
	return out
}

// Progress returns what Clients does without the per-name figures (Held,
// Subscribed, Names) and in no order: how far each stream is behind, and
// its standing NACKs. It costs one step per stream and type, not per name
// held, so that a metrics scrape can afford it at any fleet size.
func (s *Server) Progress() []ClientStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registry.statuses(false)
}

// statuses gathers the status of every stream, counting the names each
// holds and subscribed to only when names is set. Server.mu held.
func (r *registry) statuses(names bool) []ClientStatus {
	out := make([]ClientStatus, 0, len(r.clients))
	for c := range r.clients {
		c.mu.Lock()
		cs := ClientStatus{
			ID:        c.node.GetId(),
			Cluster:   c.node.GetCluster(),
			UserAgent: c.node.GetUserAgentName(),
			GRPC:      c.grpc,
			Scope:     c.scopeName,
			Variant:   c.variant,
			Peer:      c.peer,
			Connected: c.since,
		}
		for _, w := range c.order {
			ts := TypeStatus{
				TypeURL:  w.t.url,
				Wildcard: w.wildcard,
				Pending:  len(w.dirty) + w.pendingScan(),
			}
			w.ackState.status(&ts)
			if names {
				for sl, h := range w.sent.all() {
					if h != nil && h != stale {
						ts.Held++
					}
					if w.explicit(sl) {
						ts.Subscribed++
						ts.Names = keepFirst(ts.Names, sl.name)
					}
				}
			}
			cs.Types = append(cs.Types, ts)
		}
		c.mu.Unlock()
		out = append(out, cs)
	}
	return out
}

// status fills the response and answer fields of ts (see ackState).
func (a *ackState) status(ts *TypeStatus) {
	ts.Pushes, ts.LastVersion, ts.LastNonce, ts.AckedVersion = a.pushes, a.lastVersion, a.lastNonce, a.acked
	if a.nack != nil {
		n := *a.nack
		ts.NACK = &n
	}
}

// keepFirst inserts name into names, sorted, keeping the first
// MaxStatusNames: a bounded sample that does not depend on the order in
// which the names were subscribed.
func keepFirst(names []string, name string) []string {
	if len(names) == MaxStatusNames && name >= names[len(names)-1] {
		return names
	}
	i, _ := slices.BinarySearch(names, name)
	names = slices.Insert(names, i, name)
	if len(names) > MaxStatusNames {
		names = names[:MaxStatusNames]
	}
	return names
}

// id names the client in logs. client.mu or Server.mu held.
func (c *client) id() string {
	if id := c.node.GetId(); id != "" {
		return id
	}
	return c.peer
}
