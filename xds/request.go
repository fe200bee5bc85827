package xds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
)

// identify records the node of the first request. Both locks held.
func (c *client) identify(n *corev3.Node) {
	if c.node == nil && n != nil {
		c.node = n
		c.grpc = isGRPC(n)
		c.scope, c.scopeName = c.s.scoper.of(n)
		c.s.registry.join(c)
	}
}

// request is what onSotW and onDelta read alike from either request type.
type request interface {
	GetTypeUrl() string
	GetNode() *corev3.Node
}

// typeOf is the type a request is for: the per-type stream's fixed type,
// else the request's type_url, which ADS requires.
func typeOf(fixed string, req request) (string, *refusal) {
	if fixed != "" {
		return fixed, nil
	}
	if typ := req.GetTypeUrl(); typ != "" {
		return typ, nil
	}
	return "", newRefusal(reasonNoTypeURL, codes.InvalidArgument, "type_url is required on an aggregated stream")
}

// lock takes Server.mu and client.mu for a subscription change, records the
// client's node and returns its watch of typ; release both with unlock. It
// returns nil, with nothing held, when the client has disconnected or is
// refused (then with the refusal).
func (c *client) lock(typ string, req request) (*watch, *refusal) {
	s := c.s
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return nil, nil
	}
	t, r := c.storeFor(typ)
	if r != nil {
		s.mu.Unlock()
		return nil, r
	}
	c.mu.Lock()
	c.identify(req.GetNode())
	w := c.watchFor(t)
	if len(w.pins) > 0 {
		w.sweep()
	}
	return w, nil
}

// unlock releases what lock took.
func (c *client) unlock() {
	c.mu.Unlock()
	c.s.mu.Unlock()
}

// answered acts on a request's answer to a response, as ackState.answerSotW
// or answerDelta recorded it: a rejection (kept for the admin API) is
// logged once and counted, and an answer to the latest response, ACK or
// NACK, tells the gate what the client has processed (acknowledged).
// client.mu held.
func (w *watch) answered(latest bool, nack *NACKStatus) {
	if nack != nil {
		w.t.m.nacks.Inc()
		w.c.s.log.Warn("client rejected a response", "client", w.c.id(), "type", w.t.url,
			"version", nack.Version, "nonce", nack.Nonce, "error", nack.Error)
	}
	if latest {
		w.acknowledged(w.c.member)
	}
}

// storeFor returns the store the client's request of typ works on: the
// server's store of a served type, else a private empty store of the
// client's own, which lives as long as the stream, so that the request is
// answered like any other for names that do not exist. Server.mu held.
func (c *client) storeFor(typ string) (*typeState, *refusal) {
	s := c.s
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

// checkNames refuses a name list longer than NamesPerRequest.
func (l Limits) checkNames(field string, n int) *refusal {
	if limit := l.NamesPerRequest; n > limit {
		return newRefusal(reasonNamesPerRequest, codes.ResourceExhausted,
			"%s lists %d names, more than the %d allowed per request", field, n, limit)
	}
	return nil
}

// refuse ends the client's stream with r's status: it is counted, logged
// once, and the stream's context is cancelled, so that its reader stops
// after the request being handled, its writer stops sending, and the
// disconnect frees what it held. Only the first refusal of a stream
// counts.
func (c *client) refuse(r *refusal) {
	if !c.refused.CompareAndSwap(nil, r) {
		return
	}
	s := c.s
	s.m.refused.WithLabelValues(r.reason).Inc()
	s.log.Warn("refusing a client", "client", c.peer, "reason", r.reason, "err", r.err)
	if c.cancel != nil {
		c.cancel()
	}
}
