package xds

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// Register registers ADS and the per-type CDS, EDS, LDS, RDS and SDS
// services (SotW and delta) on g. Fetch (REST-style unary) is not served.
func (s *Server) Register(g *grpc.Server) {
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, adsService{s})
	clusterservice.RegisterClusterDiscoveryServiceServer(g, cdsService{s})
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, edsService{s})
	listenerservice.RegisterListenerDiscoveryServiceServer(g, ldsService{s})
	routeservice.RegisterRouteDiscoveryServiceServer(g, rdsService{s})
	secretservice.RegisterSecretDiscoveryServiceServer(g, sdsService{s})
}

type (
	sotwStream  = grpc.BidiStreamingServer[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	deltaStream = grpc.BidiStreamingServer[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
)

// serveSotW runs one SotW stream of s.
func serveSotW(s *Server, st sotwStream, variant, typ string) error {
	return serveStream(s, st, variant, false,
		func(c *client, req *discoveryv3.DiscoveryRequest, _ *wire.Inbound) { c.onSotW(typ, req) })
}

// serveDelta runs one delta stream of s.
func serveDelta(s *Server, st deltaStream, variant, typ string) error {
	return serveStream(s, st, variant, true,
		func(c *client, req *discoveryv3.DeltaDiscoveryRequest, in *wire.Inbound) { c.onDelta(typ, req, in) })
}

// serveStream runs one stream of either protocol: the handler goroutine
// reads requests and hands each to on, and a writer (see writer) sends the
// responses. It sends each response as the engine's wire.Msg through
// SendMsg (the typed Send would need a *Resp): Codec writes its
// pre-encoded bytes, another codec marshals it as the Resp it stands for.
//
// The stream ends when the read does: the client closes or goes away, or a
// request is refused (client.refuse). A send that fails ends the read too:
// gRPC ends the stream (it writes the error's status) whenever SendMsg
// fails, and the writer cancels the stream's context. A stream wrapper
// whose SendMsg can fail without calling gRPC's must end the stream
// likewise, or the stream waits for the client's next request.
func serveStream[Req, Resp any](s *Server, st grpc.BidiStreamingServer[Req, Resp], variant string, delta bool,
	on func(*client, *Req, *wire.Inbound)) error {
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	c, r := s.connect(ctx, variant, delta)
	if r != nil {
		s.m.refused.WithLabelValues(r.reason).Inc()
		return r.err
	}
	c.cancel = cancel
	defer s.disconnect(c)
	w := c.startWriter(ctx, cancel, func(o *outbound) error { return st.SendMsg(o.msg) })
	recvErr := readStream(ctx, s, st, c, on)
	cancel()
	sendErr := w.stop()
	if r := c.refused.Load(); r != nil {
		return r.err
	}
	return streamErr(sendErr, recvErr)
}

// readStream receives the stream's requests and handles them in order
// until the stream ends, and returns why it ended.
func readStream[Req, Resp any](ctx context.Context, s *Server, st grpc.BidiStreamingServer[Req, Resp], c *client,
	on func(*client, *Req, *wire.Inbound)) error {
	for first := true; ; first = false {
		req := new(Req)
		in, err := s.admission.inbound(ctx, any(req).(proto.Message), first)
		if err != nil {
			return err
		}
		err = st.RecvMsg(in)
		in.ReleaseLease()
		if err != nil {
			in.Release()
			switch {
			case status.Code(err) == codes.ResourceExhausted:
				s.m.refused.WithLabelValues(reasonRequestBytes).Inc()
			case ctx.Err() != nil:
				err = ctx.Err() // also what ends a wait for admission
			}
			return err
		}
		// Requests wait for readiness rather than being handled against
		// the still-empty store: a delta reconnect's claimed versions are
		// compared with the first state applied, so a restart re-sends
		// nothing that did not change.
		ok := s.readiness.wait(ctx)
		if ok {
			on(c, req, in)
			ok = ctx.Err() == nil // not refused (client.refuse), nor gone
		}
		in.Release()
		if !ok {
			return ctx.Err()
		}
	}
}

// streamErr is the status a stream ends with: the send error, else the
// receive error unless the client simply closed or went away.
func streamErr(sendErr, recvErr error) error {
	if sendErr != nil {
		return sendErr
	}
	if errors.Is(recvErr, io.EOF) || status.Code(recvErr) == codes.Canceled || errors.Is(recvErr, context.Canceled) {
		return nil
	}
	return recvErr
}

// connect accepts a new stream within Limits.Streams and
// Limits.StreamsPerConnection (registry.admit), or returns the refusal.
func (s *Server) connect(ctx context.Context, variant string, delta bool) (*client, *refusal) {
	c := &client{s: s}
	c.variant, c.delta, c.since = variant, delta, time.Now()
	c.rewrite = s.rewrites.forStream(strings.HasSuffix(variant, "_ads"), delta)
	c.watches = make(map[string]*watch)
	if p, ok := peer.FromContext(ctx); ok {
		c.peer = p.Addr.String()
		// A TCP connection is one peer address; other transports
		// (in-process clients, Unix sockets) have no address per
		// connection to count by.
		if _, ok := p.Addr.(*net.TCPAddr); ok {
			c.conn = c.peer
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.registry.admit(c, s.opts.Limits); r != nil {
		return nil, r
	}
	s.m.clients.WithLabelValues(variant).Inc()
	return c, nil
}

// disconnect removes the client from every index; a request handled after
// it finds the closed flag and does nothing.
func (s *Server) disconnect(c *client) {
	s.mu.Lock()
	c.closed = true
	c.mu.Lock()
	for _, w := range c.watches {
		w.drop()
	}
	s.registry.leave(c)
	c.mu.Unlock()
	c.private = nil
	s.registry.remove(c)
	s.mu.Unlock()
	s.m.clients.WithLabelValues(c.variant).Dec()
}

func unimplemented(string) error {
	return status.Error(codes.Unimplemented, "fetch is not served; use a stream")
}

// The gRPC service adapters keep the protocol methods off Server's API.
type (
	adsService struct{ s *Server }
	cdsService struct{ s *Server }
	edsService struct{ s *Server }
	ldsService struct{ s *Server }
	rdsService struct{ s *Server }
	sdsService struct{ s *Server }
)

var (
	_ discoveryv3.AggregatedDiscoveryServiceServer   = adsService{}
	_ clusterservice.ClusterDiscoveryServiceServer   = cdsService{}
	_ endpointservice.EndpointDiscoveryServiceServer = edsService{}
	_ listenerservice.ListenerDiscoveryServiceServer = ldsService{}
	_ routeservice.RouteDiscoveryServiceServer       = rdsService{}
	_ secretservice.SecretDiscoveryServiceServer     = sdsService{}
)

func (a adsService) StreamAggregatedResources(st sotwStream) error {
	return serveSotW(a.s, st, "sotw_ads", "")
}
func (a adsService) DeltaAggregatedResources(st deltaStream) error {
	return serveDelta(a.s, st, "delta_ads", "")
}

func (a cdsService) StreamClusters(st sotwStream) error {
	return serveSotW(a.s, st, "sotw_cds", ClusterType)
}
func (a cdsService) DeltaClusters(st deltaStream) error {
	return serveDelta(a.s, st, "delta_cds", ClusterType)
}
func (cdsService) FetchClusters(context.Context, *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return nil, unimplemented("clusters")
}

func (a edsService) StreamEndpoints(st sotwStream) error {
	return serveSotW(a.s, st, "sotw_eds", EndpointType)
}
func (a edsService) DeltaEndpoints(st deltaStream) error {
	return serveDelta(a.s, st, "delta_eds", EndpointType)
}
func (edsService) FetchEndpoints(context.Context, *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return nil, unimplemented("endpoints")
}

func (a ldsService) StreamListeners(st sotwStream) error {
	return serveSotW(a.s, st, "sotw_lds", ListenerType)
}
func (a ldsService) DeltaListeners(st deltaStream) error {
	return serveDelta(a.s, st, "delta_lds", ListenerType)
}
func (ldsService) FetchListeners(context.Context, *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return nil, unimplemented("listeners")
}

func (a rdsService) StreamRoutes(st sotwStream) error {
	return serveSotW(a.s, st, "sotw_rds", RouteType)
}
func (a rdsService) DeltaRoutes(st deltaStream) error {
	return serveDelta(a.s, st, "delta_rds", RouteType)
}
func (rdsService) FetchRoutes(context.Context, *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return nil, unimplemented("routes")
}

func (a sdsService) StreamSecrets(st sotwStream) error {
	return serveSotW(a.s, st, "sotw_sds", SecretType)
}
func (a sdsService) DeltaSecrets(st deltaStream) error {
	return serveDelta(a.s, st, "delta_sds", SecretType)
}
func (sdsService) FetchSecrets(context.Context, *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return nil, unimplemented("secrets")
}

// GRPCOptions are the gRPC server options that enforce the transport-level
// limits (request size, streams per connection) and keep requests not yet
// read in the clients (receive windows); pass them to grpc.NewServer of
// the server s is registered on.
func (s *Server) GRPCOptions() []grpc.ServerOption {
	l := s.opts.Limits
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(l.RequestBytes),
		grpc.MaxConcurrentStreams(uint32(l.StreamsPerConnection) + 1),
		// A stream's receive window is what a client can make the server
		// buffer before the stream's reader asks for a request (see
		// wire.FirstReads); gRPC's default grows it with the measured
		// bandwidth-delay product, up to 16 MiB. Static at 64 KiB, a
		// request waiting for its turn stays in the client; the reader
		// asking for a request opens the window to the request's size.
		// The connection's window only bounds what the transport has not
		// yet handed to its streams, so it is kept larger for uploads of
		// large requests over long round trips.
		grpc.StaticStreamWindowSize(64 << 10),
		grpc.StaticConnWindowSize(1 << 20),
	}
}
