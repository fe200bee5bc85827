package xds

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdsbridge/xdsbridge/xds/wire"
	"google.golang.org/grpc/encoding"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// Codec returns the gRPC codec to serve xDS with, as
// grpc.ForceServerCodecV2(xds.Codec()): responses are sent from the records
// encoded once per resource version, and request name lists are decoded
// once per distinct list (see wire.Codec). Using it is optional.
func Codec() encoding.CodecV2 { return wire.Codec() }

// DefaultSendBudget is Options.SendBudget when unset, and
// DefaultRequestBudget Options.RequestBudget.
const (
	DefaultSendBudget    = wire.DefaultSendBudget
	DefaultRequestBudget = wire.DefaultRequestBudget
)

// Options configure a Server.
type Options struct {
	Logger *slog.Logger
	// UnknownNameWait is the window after readiness during which a request
	// for a name the server does not know waits (until the window ends)
	// before it is answered without that name; after the window it is
	// answered at once (see doc.go, "Always answer"). Default 5s.
	// SotW CDS/LDS answer with the subscribed set without it, SotW EDS with
	// an empty ClusterLoadAssignment of that name (Envoy then finishes
	// warming the cluster), SotW RDS with an empty response, delta with the
	// name in removed_resources ("does not exist").
	UnknownNameWait time.Duration
	// Registerer, if set, receives the engine's metrics
	// (xdsbridge_xds_*).
	Registerer prometheus.Registerer
	// MaxResponseBytes bounds every response (see responseSize); default
	// DefaultMaxResponseBytes.
	MaxResponseBytes int
	// OnRefused, if set, is told of every resource version Apply refuses
	// because it alone exceeds MaxResponseBytes; it runs inside Apply.
	OnRefused func(Key, error)
	// OnDenied, if set, is told when a client subscribes by name to a
	// private resource its scope is not granted (Resource.Private); the
	// client is answered as if the resource did not exist. It runs under
	// the server's locks and must not block.
	OnDenied func(node *corev3.Node, k Key)
	// SendBudget bounds the memory that large responses in flight to all
	// clients together keep alive (records shared by several responses
	// count once; see budget); default DefaultSendBudget.
	SendBudget int
	// RequestBudget bounds the wire bytes of large requests being decoded
	// and handled at once (see wire.Inbound); default DefaultRequestBudget.
	// It takes effect with Codec.
	RequestBudget int
	// Limits bound what one client can make the server hold; zero fields
	// take DefaultLimits.
	Limits Limits
	// ConfigCluster is the name of the static cluster through which Envoys
	// on per-type streams reach this server (their bootstrap's); clusters
	// sent on those streams name it in their EDS config source. Default
	// DefaultConfigCluster.
	ConfigCluster string
	// Collections are further types served with whole-collection SotW
	// semantics, like CDS: every response lists everything subscribed, an
	// empty first request subscribes to all, and an absent resource reads
	// as deleted. They are collection names such as the MCP-over-xDS type
	// URLs istiod asks for (networking.istio.io/v1/ServiceEntry), whose
	// resources' Anys carry their own message type (istio.mcp.v1alpha1.Resource).
	// Their stores exist from the start, so a client that subscribes before
	// the first resource of one is served it when it comes.
	Collections []string
}

// Server is the xDS serving engine. Its state is split by owner, each part
// a value inside it (no indirection on the paths a push takes):
//
//   - admission: the budgets that admit large responses and requests, and
//     new streams' first reads (admission.go); their own locks;
//   - readiness: whether the first Apply happened (readiness.go);
//   - registry: the streams served, per connection and per group, under
//     Server.mu (registry.go);
//   - types: the stores, one per type, under Server.mu (store.go); gate
//     holds the two that the make-before-break gate reads without it;
//   - scoper: how nodes map to scopes (scope.go), read without a lock;
//   - views, orphans: the views' subscriptions (changes.go) and the slots
//     writers found orphaned (orphans.go), each under its own lock.
//
// Server.mu is taken before any client's, group's or writer's lock.
type Server struct {
	opts     Options
	log      *slog.Logger
	m        *metrics
	size     *responseSize
	rewrites streamRewrites
	scoper   scoping
	admission
	readiness
	gate      gateStores
	resources atomic.Int64 // entries in the stores (Resources)

	mu    sync.Mutex
	types map[string]*typeState
	registry
	views   viewSet
	orphans orphanQueue
}

// gateStores are the stores of clusters and assignments, which the gate
// reads without Server.mu: NewServer makes them, before any request, and
// they are never replaced. off turns the gate off, only in the test that
// shows what an engine that pushes each type on its own does to a client.
type gateStores struct {
	cds, eds *typeState
	off      bool
}

// NewServer returns a server with no resources that answers no request until
// the first Apply.
func NewServer(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.UnknownNameWait <= 0 {
		opts.UnknownNameWait = 5 * time.Second
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.SendBudget <= 0 {
		opts.SendBudget = DefaultSendBudget
	}
	if opts.RequestBudget <= 0 {
		opts.RequestBudget = DefaultRequestBudget
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.ConfigCluster == "" {
		opts.ConfigCluster = DefaultConfigCluster
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		m:         newMetrics(opts.Registerer),
		size:      newResponseSize(opts.MaxResponseBytes, opts.Registerer),
		admission: newAdmission(opts.SendBudget, opts.RequestBudget),
		readiness: readiness{ready: make(chan struct{})},
		rewrites:  newStreamRewrites(opts.ConfigCluster),
		types:     make(map[string]*typeState),
		registry: registry{
			clients: make(map[*client]struct{}),
			conns:   make(map[string]int),
			groups:  make(map[groupKey]*group),
		},
	}
	s.gate.cds, s.gate.eds = s.typeFor(ClusterType), s.typeFor(EndpointType)
	for _, url := range opts.Collections {
		s.typeFor(url).full = true
	}
	return s
}

// Resources is the number of resources the server holds, of every type.
// It is a measure of the server's state that is cheap to read at any time:
// the memory return policy reads it to learn that the state shrank.
func (s *Server) Resources() int64 { return s.resources.Load() }

// typeFor returns the store of a type, creating it. Only Apply and the four
// standard types create stores: a type URL a client invents never becomes
// server state (see client.storeFor). Server.mu held.
func (s *Server) typeFor(url string) *typeState {
	t := s.types[url]
	if t == nil {
		t = newTypeState(url, s.m.forType(shortType(url)))
		s.types[url] = t
	}
	return t
}
