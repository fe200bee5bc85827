// Package rest serves the xDS store to clients that poll it over REST-JSON
// (Envoy's api_config_source with api_type REST): a POST of a JSON
// DiscoveryRequest to /v3/discovery:clusters (:endpoints, :listeners,
// :routes) is answered with a JSON DiscoveryResponse holding the requested
// resources (all of them when the request names none), or with 304 Not
// Modified when the request's version_info is already the current one.
//
// It is a view of the engine's store (xds.Server.Select): the resources are
// the very entries the gRPC streams send, with the same per-resource
// content-hash versions; clusters carry an EDS config source that polls
// this same endpoint (api_type REST naming the bootstrap's xDS cluster),
// since a polling Envoy has no ADS. The response's version_info is a hash
// of the names and versions it holds, so it is the same on every replica
// and after restarts, and a poller is answered 304 by any of them.
//
// Answers:
//   - 503 before the engine's first Apply (the readiness gate of the
//     streams: an empty answer would remove every cluster);
//   - 400 for a body that is not a DiscoveryRequest or names another type,
//     413 for a body over Options.MaxRequestBytes, 405 for a method other
//     than POST, 404 for another path;
//   - a request with error_detail is a NACK of the version last sent to that
//     node: it is logged and counted like a stream's NACK and shown in
//     Clients, and that version is not sent to the node again (304 until the
//     content changes), so a rejected version is not re-sent in a loop.
//
// Polling is stateless apart from a bounded table of the pollers seen
// (Options.MaxClients, least recently seen evicted), kept for the admin
// API's /clients; a client cannot make the server hold more.
package rest

import (
	"log/slog"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsbridge/xdsbridge/xds"
)

// Defaults of Options.
const (
	DefaultRefreshDelay    = time.Second
	DefaultMaxRequestBytes = 1 << 20
	DefaultMaxClients      = 1024
)

// paths maps each REST endpoint to its type.
var paths = map[string]string{
	"/v3/discovery:clusters":  xds.ClusterType,
	"/v3/discovery:endpoints": xds.EndpointType,
	"/v3/discovery:listeners": xds.ListenerType,
	"/v3/discovery:routes":    xds.RouteType,
}

// Paths returns the URL paths the handler serves.
func Paths() []string {
	return []string{"/v3/discovery:clusters", "/v3/discovery:endpoints", "/v3/discovery:listeners", "/v3/discovery:routes"}
}

// Options configure a Handler.
type Options struct {
	Server *xds.Server
	// ConfigCluster is the static cluster of the pollers' bootstrap through
	// which they reach this endpoint; clusters name it in their EDS config
	// source. Default xds.DefaultConfigCluster.
	ConfigCluster string
	// RefreshDelay is the polling interval those config sources ask for.
	RefreshDelay time.Duration
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes int64
	// MaxClients bounds the pollers remembered for Clients.
	MaxClients int
	Logger     *slog.Logger
}

// Handler serves the REST-JSON endpoints.
type Handler struct {
	opts    Options
	rewrite *xds.Rewrite
	log     *slog.Logger

	mu      sync.Mutex
	pollers map[string]*poller
	// cache holds the last answer to a request naming nothing, per type
	// and gRPC-ness: the common CDS poll costs a map lookup while the store
	// is unchanged.
	cache map[cacheKey]*answer
}

type cacheKey struct {
	typ  string
	grpc bool
}

// answer is a built response: its version and JSON body.
type answer struct {
	gen     uint64
	version string
	body    []byte
}

// poller is what is remembered of one polling node, for the admin API.
type poller struct {
	status xds.ClientStatus
	types  map[string]*pollType
	seen   time.Time
}

type pollType struct {
	xds.TypeStatus
	// rejected is the version the node NACKed ("" if none): not sent to it
	// again.
	rejected string
}

// New returns a handler serving o.Server's store.
func New(o Options) *Handler {
	if o.ConfigCluster == "" {
		o.ConfigCluster = xds.DefaultConfigCluster
	}
	if o.RefreshDelay <= 0 {
		o.RefreshDelay = DefaultRefreshDelay
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cs := restSource(o.ConfigCluster, o.RefreshDelay)
	return &Handler{
		opts:    o,
		rewrite: xds.NewRewrite("rest", func(string) *corev3.ConfigSource { return cs }),
		log:     o.Logger,
		pollers: make(map[string]*poller),
		cache:   make(map[cacheKey]*answer),
	}
}

// restSource is the config source of a resource polled here: what a
// cluster's eds_config must say for an Envoy that polls its CDS.
func restSource(cluster string, refresh time.Duration) *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType:             corev3.ApiConfigSource_REST,
			TransportApiVersion: corev3.ApiVersion_V3,
			ClusterNames:        []string{cluster},
			RefreshDelay:        durationpb.New(refresh),
		}},
	}
}
