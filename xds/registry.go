package xds

import (
	"google.golang.org/grpc/codes"
)

// registry is the streams the server serves, guarded by Server.mu: every
// client, the open streams per connection (peer address), which
// Limits.Streams and Limits.StreamsPerConnection bound, and the groups of
// the per-type streams of one Envoy (gate.go). gen is the Apply
// generation: an Apply collects each client it touches once, by the
// client's own (registration.gen; see fanout).
type registry struct {
	clients map[*client]struct{}
	conns   map[string]int
	groups  map[groupKey]*group
	gen     uint64
}

// admit registers c within the limits l, or returns the refusal.
// Server.mu held.
func (r *registry) admit(c *client, l Limits) *refusal {
	if len(r.clients) >= l.Streams {
		return newRefusal(reasonStreams, codes.ResourceExhausted, "the server already serves %d streams", l.Streams)
	}
	if c.conn != "" {
		if r.conns[c.conn] >= l.StreamsPerConnection {
			return newRefusal(reasonStreamsPerConn, codes.ResourceExhausted,
				"this connection already has %d streams open", l.StreamsPerConnection)
		}
		r.conns[c.conn]++
	}
	r.clients[c] = struct{}{}
	return nil
}

// remove forgets c, which admit registered. Server.mu held.
func (r *registry) remove(c *client) {
	delete(r.clients, c)
	if c.conn != "" {
		if r.conns[c.conn]--; r.conns[c.conn] <= 0 {
			delete(r.conns, c.conn)
		}
	}
}
