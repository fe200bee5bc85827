// Package xds serves Envoy resources over the xDS protocol: ADS and the
// per-type services, State-of-the-World and delta.
package xds

import (
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Resource is one named resource of one type (a v3 type URL such as
// resource.ClusterType).
type Resource struct {
	Type    string
	Name    string
	Message proto.Message
	// GRPCOnly resources (the proxyless listener/route chain) are served
	// only to clients whose node identifies as gRPC (user_agent_name).
	GRPCOnly bool
}

// Key names a resource to remove.
type Key struct {
	Type string
	Name string
}

// Options configure a Server.
type Options struct {
	Logger *slog.Logger
	// UnknownNameWait is how long a request for a name the server does not
	// know waits before it is answered without that name. Default 5s.
	UnknownNameWait time.Duration
}

// Server is the xDS serving engine.
type Server struct{}

// NewServer returns a server with no resources that answers no request until
// the first Apply.
func NewServer(opts Options) *Server { return &Server{} }

// Register registers ADS and the per-type CDS, EDS, LDS and RDS services
// (SotW and delta) on g.
func (s *Server) Register(g *grpc.Server) { panic("not implemented") }

// Apply upserts and removes resources as one change. Versions are content
// hashes. Changes are pushed to subscribed clients in make-before-break order.
// The first Apply marks the server ready.
func (s *Server) Apply(upserts []Resource, removals []Key) { panic("not implemented") }
