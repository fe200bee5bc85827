// Package envoysim is an xDS client that subscribes, ACKs and NACKs the way
// Envoy does. Tests use it to check the protocol behaviour of a server (its
// Log records every response); the load generator runs thousands of them in
// one process in Light mode, which keeps only names, versions and hashes
// (the names and versions shared by the fleet's clients: Interner).
//
// What it reproduces of Envoy:
//   - CDS first (wildcard or named), then EDS for exactly the clusters held;
//     the EDS subscription follows every CDS change, and the EDS request is
//     sent before the CDS ACK, as Envoy's ADS mux does when it resumes EDS
//     after processing clusters.
//   - SotW: ACK = version_info + response_nonce (+ the current names); NACK =
//     the previous version_info, the nonce and error_detail. A CDS/LDS
//     response is the full set (absent = deleted, and a deleted cluster's
//     assignment is dropped); EDS/RDS responses are merged.
//   - Delta: "*" (or names) for CDS, resource_names_subscribe/_unsubscribe
//     for EDS as clusters come and go, ACK/NACK by nonce, removed_resources
//     applied, per-resource versions, initial_resource_versions on the first
//     request per type (a reconnect).
//
// The client does not reconnect: a test that wants a reconnect starts a new
// client with InitialVersions.
package envoysim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Type URLs of the resource types the client understands.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	SecretType   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// Options configure a Client. Addr is required.
type Options struct {
	Addr      string // host:port of the xDS server
	Node      string // node id; default "envoysim"
	Cluster   string // node.cluster; default "envoysim"
	UserAgent string // node.user_agent_name; default "envoy"
	Delta     bool   // incremental (delta) protocol instead of SotW
	// PerType opens one stream per type (ClusterDiscoveryService,
	// EndpointDiscoveryService, ...) instead of one ADS stream.
	PerType bool
	// Clusters are the CDS names to subscribe; nil means wildcard.
	Clusters []string
	// Types are extra type URLs (ListenerType, RouteType) to subscribe to,
	// with the names in Clusters (wildcard when Clusters is nil), as a
	// proxyless gRPC client names its listener and route after the service.
	Types []string
	// Listeners makes the client an edge Envoy whose bootstrap holds
	// nothing but the server: it subscribes to every listener (LDS
	// wildcard) and, as listeners come and go, to the route
	// configurations (RDS) and secrets (SDS) they name, as it does to the
	// assignments of its clusters; it warms clusters and listeners and
	// routes simulated requests as Envoy does (envoy.go: Request,
	// Traffic; not in Light mode). Types must not be set with it.
	Listeners bool
	// Reject, when it returns an error for a response, makes the client NACK
	// it with that error as error_detail; the response is not applied.
	Reject func(typeURL string, resources []*anypb.Any) error
	// InitialVersions (delta only) are sent as initial_resource_versions on
	// the first request of each type, as after a reconnect; the client
	// starts out holding those names (with no content), so the EDS names
	// of the clusters listed are subscribed right away.
	InitialVersions map[string]map[string]string
	// InitialHashes optionally give the hashes (see Hash) of the content
	// held under InitialVersions, so that a reconnected Light client can be
	// validated without the server re-sending anything.
	InitialHashes map[string]map[string]uint64
	// Light keeps only names, versions and hashes: no protos in State and
	// nothing in Log (see Stats). For fleets of thousands of clients.
	Light bool
	// Intern, if set, is where the client keeps the names and versions it
	// holds, shared with the other clients given the same Interner.
	Intern *Interner
	// OnResponse, if set, is called after each response has been applied
	// (or NACKed), from the stream's receiving goroutine. In Light mode
	// Received.Names is filled for the call but not kept.
	OnResponse func(c *Client, r Received)
	// NodeOnFirstOnly sends the node only on the first request of each
	// stream (Envoy's set_node_on_first_message_only); by default every
	// request carries it, Envoy's default.
	NodeOnFirstOnly bool
	// DialOptions are appended to the client's own (insecure, large
	// receive limit).
	DialOptions []grpc.DialOption
	Logger      *slog.Logger
}

// Received describes one response.
type Received struct {
	Time             time.Time
	TypeURL, Version string
	Nonce            string
	Names            []string // resource names in the response, in order
	Removed          []string // delta removed_resources
	Bytes            int      // proto.Size of the response
	NACKed           bool
}

// Stats are the client's counters; kept in every mode.
type Stats struct {
	Responses int64 // responses received
	Resources int64 // resources received (sum of len(Names))
	Removed   int64 // delta removals received
	Bytes     int64 // sum of Received.Bytes
	NACKs     int64 // responses NACKed
	Requests  int64 // requests sent
}

// State is what the client holds. Maps are fresh copies; the protos are
// shared and must not be modified. In Light mode, and for names known only
// from InitialVersions, the map values are nil but the keys are present.
type State struct {
	Clusters    map[string]*clusterv3.Cluster
	Assignments map[string]*endpointv3.ClusterLoadAssignment
	// Resources holds the other types (Types) by type URL and name.
	Resources map[string]map[string]*anypb.Any
	// Versions: typeURL -> name -> version (delta: the resource's version;
	// SotW: the version_info of the response that last carried it).
	Versions map[string]map[string]string
	// Hashes: typeURL -> name -> Hash of the resource's serialized bytes.
	Hashes map[string]map[string]uint64
}

// entry is one resource held.
type entry struct {
	version string
	hash    uint64
	msg     any   // *clusterv3.Cluster, *endpointv3.ClusterLoadAssignment, *anypb.Any; nil in Light mode
	refs    *refs // a listener's, with Options.Listeners
}

// Client is one simulated Envoy. Its methods are safe for concurrent use.
type Client struct {
	opts   Options
	log    *slog.Logger
	node   *corev3.Node
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	held     map[string]map[string]entry
	received []Received
	stats    Stats
	changed  chan struct{} // closed and replaced after every response
	err      error         // why a stream ended
	sotw     map[string]*sotwType
	delta    map[string]*deltaType
	warm     *warmth // with Options.Listeners, unless Light
}

// Start dials opts.Addr, opens the streams and sends the first requests. It
// returns once the streams are open; responses are handled in the
// background until Close.
func Start(ctx context.Context, opts Options) (*Client, error) {
	if opts.Addr == "" {
		return nil, errors.New("starting envoysim: empty Addr")
	}
	if opts.Node == "" {
		opts.Node = "envoysim"
	}
	if opts.Cluster == "" {
		opts.Cluster = "envoysim"
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "envoy"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	for _, t := range opts.Types {
		if t != ListenerType && t != RouteType {
			return nil, fmt.Errorf("starting envoysim: unsupported extra type %q", t)
		}
		if opts.Listeners {
			return nil, errors.New("starting envoysim: Types and Listeners both set")
		}
	}
	c := &Client{
		opts:    opts,
		log:     opts.Logger.With("node", opts.Node),
		node:    &corev3.Node{Id: opts.Node, Cluster: opts.Cluster, UserAgentName: opts.UserAgent},
		held:    map[string]map[string]entry{},
		changed: make(chan struct{}),
	}
	if opts.Listeners && !opts.Light {
		c.warm = newWarmth()
	}
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1 << 30)),
	}, opts.DialOptions...)
	conn, err := grpc.NewClient(opts.Addr, dial...)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", opts.Addr, err)
	}
	c.conn = conn
	sctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	// Bound the stream opening by the caller's ctx, but not the streams.
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	if opts.Delta {
		err = c.startDelta(sctx)
	} else {
		err = c.startSotW(sctx)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("starting envoysim %s: %w", opts.Node, err)
	}
	return c, nil
}

// types lists the subscribed types, CDS and EDS first.
func (c *Client) types() []string {
	if c.opts.Listeners {
		return []string{ClusterType, EndpointType, ListenerType, RouteType, SecretType}
	}
	return append([]string{ClusterType, EndpointType}, c.opts.Types...)
}

// follows is the type whose held resources name what a type subscribes
// to ("" when it is subscribed to on its own): clusters name their
// assignments; with Options.Listeners, listeners name their route
// configurations and secrets.
func (c *Client) follows(typeURL string) string {
	switch {
	case typeURL == EndpointType:
		return ClusterType
	case c.opts.Listeners && (typeURL == RouteType || typeURL == SecretType):
		return ListenerType
	}
	return ""
}

// dependents are the types that follow typeURL.
func (c *Client) dependents(typeURL string) []string {
	switch {
	case typeURL == ClusterType:
		return []string{EndpointType}
	case c.opts.Listeners && typeURL == ListenerType:
		return []string{RouteType, SecretType}
	}
	return nil
}

// wantLocked is the subscription of a type that follows another: what
// the held resources of that one name, sorted. c.mu held.
func (c *Client) wantLocked(typeURL string) []string {
	var out []string
	for name, e := range c.held[c.follows(typeURL)] {
		switch {
		case typeURL == EndpointType:
			out = append(out, name)
		case e.refs == nil:
		case typeURL == RouteType:
			out = append(out, e.refs.routes...)
		default:
			out = append(out, e.refs.secrets...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// dropUnwantedLocked drops the held resources of a following type that
// nothing names any more (Envoy lets go of a route configuration or a
// secret no listener uses, as of an assignment with its cluster), and
// returns their names. c.mu held.
func (c *Client) dropUnwantedLocked(typeURL string, want []string) []string {
	var gone []string
	for name := range c.held[typeURL] {
		if _, ok := slices.BinarySearch(want, name); !ok {
			delete(c.held[typeURL], name)
			gone = append(gone, name)
		}
	}
	return gone
}

// warmLocked tells the Envoy model what a response changed: up were
// applied, removed dropped. c.mu held.
func (c *Client) warmLocked(typeURL string, up []decoded, removed []string) {
	w := c.warm
	if w == nil {
		return
	}
	switch typeURL {
	case ClusterType:
		w.clusters(up, removed)
	case EndpointType:
		w.assignments(up)
	case ListenerType:
		w.listeners(up, removed)
	case RouteType:
		w.routeConfigs(up, removed)
	case SecretType:
		w.secretsIn(up, removed)
	}
}

// Close ends the streams and the connection and waits for the goroutines.
func (c *Client) Close() {
	c.cancel()
	if c.conn != nil {
		_ = c.conn.Close()
	}
	c.wg.Wait()
}

// Err returns why the streams ended, or nil while they run.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Log returns every response received, in order (empty in Light mode).
func (c *Client) Log() []Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.received)
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Hash returns the hash and version of a held resource, cheaply.
func (c *Client) Hash(typeURL, name string) (hash uint64, version string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.held[typeURL][name]
	return e.hash, e.version, ok
}

// Resource returns the held resource (*clusterv3.Cluster,
// *endpointv3.ClusterLoadAssignment or *anypb.Any; read-only), or nil in
// Light mode or when not held. Cheaper than State for one name.
func (c *Client) Resource(typeURL, name string) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[typeURL][name].msg
}

// Len returns how many resources of a type the client holds.
func (c *Client) Len(typeURL string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held[typeURL])
}

// Versions returns typeURL -> name -> version of what the client holds:
// what a reconnecting delta client lists in InitialVersions. Cheaper than
// State.
func (c *Client) Versions() map[string]map[string]string {
	return project(c, func(e entry) string { return e.version })
}

// Hashes returns typeURL -> name -> hash of what the client holds.
func (c *Client) Hashes() map[string]map[string]uint64 {
	return project(c, func(e entry) uint64 { return e.hash })
}

// project returns typeURL -> name -> f(entry) of what the client holds.
func project[V any](c *Client, f func(entry) V) map[string]map[string]V {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]V, len(c.held))
	for t, m := range c.held {
		vs := make(map[string]V, len(m))
		for name, e := range m {
			vs[name] = f(e)
		}
		out[t] = vs
	}
	return out
}

// State returns a copy of what the client holds now.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateLocked()
}

func (c *Client) stateLocked() State {
	s := State{
		Clusters:    map[string]*clusterv3.Cluster{},
		Assignments: map[string]*endpointv3.ClusterLoadAssignment{},
		Resources:   map[string]map[string]*anypb.Any{},
		Versions:    map[string]map[string]string{},
		Hashes:      map[string]map[string]uint64{},
	}
	for t, m := range c.held {
		vs := make(map[string]string, len(m))
		hs := make(map[string]uint64, len(m))
		for name, e := range m {
			vs[name], hs[name] = e.version, e.hash
			switch msg := e.msg.(type) {
			case *clusterv3.Cluster:
				s.Clusters[name] = msg
			case *endpointv3.ClusterLoadAssignment:
				s.Assignments[name] = msg
			case *anypb.Any:
				if s.Resources[t] == nil {
					s.Resources[t] = map[string]*anypb.Any{}
				}
				s.Resources[t][name] = msg
			default: // Light mode or known from InitialVersions only
				switch t {
				case ClusterType:
					s.Clusters[name] = nil
				case EndpointType:
					s.Assignments[name] = nil
				default:
					if s.Resources[t] == nil {
						s.Resources[t] = map[string]*anypb.Any{}
					}
					s.Resources[t][name] = nil
				}
			}
		}
		s.Versions[t], s.Hashes[t] = vs, hs
	}
	return s
}

// WaitFor returns nil as soon as cond holds (checked now and after every
// response), or an error when ctx ends or the streams end first; the error
// summarizes the state the client had. cond gets a fresh State each time.
func (c *Client) WaitFor(ctx context.Context, cond func(State) bool) error {
	for {
		c.mu.Lock()
		s, ch, serr := c.stateLocked(), c.changed, c.err
		c.mu.Unlock()
		if cond(s) {
			return nil
		}
		if serr != nil {
			return fmt.Errorf("waiting for state: stream ended: %w (state: %s)", serr, s.Summary())
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for state: %w (state: %s)", ctx.Err(), s.Summary())
		}
	}
}

// Summary describes a state briefly, for error messages.
func (s State) Summary() string {
	var out strings.Builder
	for _, t := range slices.Sorted(maps.Keys(s.Versions)) {
		names := slices.Sorted(maps.Keys(s.Versions[t]))
		short := t[len("type.googleapis.com/"):]
		if len(names) > 8 {
			out.WriteString(fmt.Sprintf("%s: %d resources (%v ...); ", short, len(names), names[:8]))
			continue
		}
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + "@" + s.Versions[t][n]
		}
		out.WriteString(fmt.Sprintf("%s: %v; ", short, parts))
	}
	if out.String() == "" {
		return "nothing held"
	}
	return out.String()
}

// record stores r, bumps the counters and wakes WaitFor; c.mu must be held.
func (c *Client) recordLocked(r Received) {
	c.stats.Responses++
	c.stats.Resources += int64(len(r.Names))
	c.stats.Removed += int64(len(r.Removed))
	c.stats.Bytes += int64(r.Bytes)
	if r.NACKed {
		c.stats.NACKs++
	}
	if !c.opts.Light {
		c.received = append(c.received, r)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// fail records why a stream ended and wakes WaitFor.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		c.log.Debug("stream ended", "err", err)
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// dropCluster removes a cluster and its assignment; c.mu must be held.
func (c *Client) dropClusterLocked(name string) {
	delete(c.held[ClusterType], name)
	delete(c.held[EndpointType], name)
}

func (c *Client) heldLocked(t string) map[string]entry {
	m := c.held[t]
	if m == nil {
		m = map[string]entry{}
		c.held[t] = m
	}
	return m
}

// endedBy is what a first request's failure to send says: io.EOF means the
// server ended the stream before it (refused it, say), and the stream's
// status, which only a receive returns, is the reason. Nothing receives on
// the stream yet when the first requests go out, so receiving here races
// with nothing.
func endedBy(s grpc.ClientStream, err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	var discard emptypb.Empty
	if rerr := s.RecvMsg(&discard); rerr != nil && !errors.Is(rerr, io.EOF) {
		return fmt.Errorf("%w (%w)", err, rerr)
	}
	return err
}
