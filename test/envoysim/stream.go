package envoysim

import (
	"fmt"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// stream is one gRPC stream of either protocol. Sends are serialized
// because a CDS handler sends EDS subscription updates on a stream that
// another type's handler may also be sending on.
type stream[Req, Resp any] struct {
	s        grpc.BidiStreamingClient[Req, Resp]
	sendMu   sync.Mutex
	sentNode bool // guarded by sendMu
}

// nodeLocked returns the node for the next request on s: on every request,
// as Envoy does, or only on the first with Options.NodeOnFirstOnly.
// s.sendMu must be held.
func (c *Client) nodeLocked(sentNode *bool) *corev3.Node {
	if *sentNode && c.opts.NodeOnFirstOnly {
		return nil
	}
	*sentNode = true
	return c.node
}

// nackStatus is the error_detail of a NACK for err, nil for an ACK.
func nackStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	return &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
}

// receive hands every response of s to handle until the stream or handle
// fails; the failure ends the client (see Err).
func receive[Req, Resp any](c *Client, s *stream[Req, Resp], handle func(*Resp) error) {
	defer c.wg.Done()
	for {
		resp, err := s.s.Recv()
		if err != nil {
			c.fail(fmt.Errorf("receiving: %w", err))
			return
		}
		if err := handle(resp); err != nil {
			c.fail(err)
			return
		}
	}
}

// ignore records a response of a type the client has no subscription for;
// Envoy ignores such a response.
func (c *Client) ignore(r Received) {
	c.log.Warn("response for a type not subscribed", "type", r.TypeURL)
	c.mu.Lock()
	c.recordLocked(r)
	c.mu.Unlock()
}

// observed logs a NACK and calls Options.OnResponse, after a response was
// applied (or rejected) and recorded.
func (c *Client) observed(r Received, reject error) {
	if reject != nil {
		c.log.Debug("NACK", "type", r.TypeURL, "version", r.Version, "nonce", r.Nonce, "err", reject)
	}
	if c.opts.OnResponse != nil {
		c.opts.OnResponse(c, r)
	}
}
