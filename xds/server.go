// Package xds serves Envoy resources over the xDS protocol: ADS and the
// per-type services, State-of-the-World and delta.
//
// The engine keeps one store per type: per name the current entry (proto
// marshalled once, content-hash version, shared by every client) and the
// watches subscribed to it, plus the wildcard watches of the type. Apply
// compares hashes, and for each changed name marks it pending on just the
// watches subscribed to it; each stream's own goroutine then builds and
// sends what that client is owed (see owed.go). Per client the pending
// state is a map of names coalescing to the newest version, so a client
// that does not read costs O(its resources) and delays nobody. The design
// decisions and their reasons are in doc.go.
package xds

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
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
	// GRPC, if set, is the variant of Message served to gRPC clients (a
	// cluster without the settings proxyless gRPC rejects). It has the same
	// type and name, its own content-hash version, and is marshalled once
	// per version like Message.
	GRPC proto.Message
}

// For returns the message a client of that class receives, and false if
// the resource is hidden from it. It is the rule the engine applies to
// every client, for callers that show what a client would get.
func (r Resource) For(grpc bool) (proto.Message, bool) {
	switch {
	case r.GRPCOnly && !grpc:
		return nil, false
	case grpc && r.GRPC != nil:
		return r.GRPC, true
	}
	return r.Message, true
}

// ForNode is For for the client class of node n: the rule the engine
// applies to a stream of that node. Only the node's user_agent_name decides
// today (gRPC or not); a rule that scopes resources per node goes here too.
func (r Resource) ForNode(n *corev3.Node) (proto.Message, bool) {
	return r.For(isGRPC(n))
}

// Key names a resource to remove.
type Key struct {
	Type string
	Name string
}

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
	// SendBudget bounds the memory that large responses in flight to all
	// clients together keep alive (records shared by several responses
	// count once; see budget); default DefaultSendBudget.
	SendBudget int
	// RequestBudget bounds the wire bytes of large requests being decoded
	// and handled at once (see admit.go); default DefaultRequestBudget.
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
}

// Server is the xDS serving engine.
type Server struct {
	opts     Options
	log      *slog.Logger
	m        *metrics
	size     *responseSize
	budget   *budget
	admit    *budget     // requests being decoded and handled (admit.go)
	reads    *firstReads // leases of new streams' first reads (admit.go)
	rewrites streamRewrites
	readyNs  atomic.Int64  // unix nanos of the first Apply; 0 = not ready
	ready    chan struct{} // closed by the first Apply

	mu      sync.Mutex
	types   map[string]*typeState
	clients map[*client]struct{}
	conns   map[string]int // open streams per connection (peer address)
	gen     uint64         // Apply generation, to collect each touched client once
	views   viewSet
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
	return &Server{
		opts:     opts,
		log:      opts.Logger,
		m:        newMetrics(opts.Registerer),
		size:     newResponseSize(opts.MaxResponseBytes, opts.Registerer),
		budget:   newBudget(opts.SendBudget),
		admit:    newBudget(opts.RequestBudget),
		reads:    newFirstReads(opts.RequestBudget),
		ready:    make(chan struct{}),
		rewrites: newStreamRewrites(opts.ConfigCluster),
		types:    make(map[string]*typeState),
		clients:  make(map[*client]struct{}),
		conns:    make(map[string]int),
	}
}

// InFlight is the bytes charged to the send and request budgets: large
// responses accepted for sending and not yet written, and large requests
// being decoded and handled. While it is above zero the server is in the
// middle of a storm even if it allocates nothing (it writes shared
// encoded records, and a slow client can keep it waiting for seconds);
// the memory return policy reads it so as not to collect then.
func (s *Server) InFlight() int64 { return s.budget.inUse() + s.admit.inUse() }

// Ready reports whether the first Apply happened, i.e. whether the server
// answers requests.
func (s *Server) Ready() bool { return s.readyNs.Load() != 0 }

func (s *Server) readyAt() time.Time {
	if ns := s.readyNs.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// typeFor returns the store of a type, creating it. Only Apply and the four
// standard types create stores: a type URL a client invents never becomes
// server state (see storeFor). Server.mu held.
func (s *Server) typeFor(url string) *typeState {
	t := s.types[url]
	if t == nil {
		t = newTypeState(url, s.m.forType(shortType(url)))
		s.types[url] = t
	}
	return t
}

func newTypeState(url string, m *typeMetrics) *typeState {
	return &typeState{
		url:   url,
		rank:  rank(url),
		brk:   breakRank(url),
		full:  fullState(url),
		slots: make(map[string]*slot),
		wild:  make(map[*watch]struct{}),
		m:     m,
	}
}

// storeFor returns the store a client's request of typ works on: the
// server's store of a served type, else a private empty store of the
// client's own, which lives as long as the stream, so that the request is
// answered like any other for names that do not exist. Server.mu held.
func (s *Server) storeFor(c *client, typ string) (*typeState, *refusal) {
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

type change struct {
	t  *typeState
	sl *slot
	e  *entry // nil: removal
}

// Apply upserts and removes resources as one change. Versions are content
// hashes; an upsert identical to what is served is a no-op, and so is a
// removal of an unknown name. Changes are pushed to subscribed clients in
// make-before-break order. The first Apply marks the server ready. A
// resource that cannot be marshalled, or whose Type does not match its
// message, is logged and skipped. If a name is both upserted and removed,
// the removal wins.
func (s *Server) Apply(upserts []Resource, removals []Key) {
	start := time.Now()
	entries := make([]*entry, 0, len(upserts))
	for _, r := range upserts {
		e, err := newEntry(r)
		if err != nil {
			s.log.Error("skipping resource", "err", err)
			continue
		}
		if err := s.size.check(e); err != nil {
			s.refuseResource(e, err)
			continue
		}
		entries = append(entries, e)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var changes []change
	for _, e := range entries {
		t := s.typeFor(e.any.TypeUrl)
		sl := t.get(e.name)
		if c := sl.cur; c != nil && c.version == e.version && c.grpcOnly == e.grpcOnly && same(c.grpc, e.grpc) {
			continue
		}
		changes = append(changes, change{t, sl, e})
	}
	nup := len(changes)
	for _, k := range removals {
		if t := s.types[k.Type]; t != nil {
			if sl := t.slots[k.Name]; sl != nil && sl.cur != nil {
				changes = append(changes, change{t, sl, nil})
			}
		}
	}
	first := s.readyNs.Load() == 0
	if len(changes) == 0 && !first {
		return
	}
	// Upserts before removals, upserts in rank order and removals in break
	// order: the order in which a writer that looks mid-Apply finds them is
	// make-before-break too.
	slices.SortStableFunc(changes[:nup], func(a, b change) int { return a.t.rank - b.t.rank })
	slices.SortStableFunc(changes[nup:], func(a, b change) int { return a.t.brk - b.t.brk })

	s.gen++
	for _, ch := range changes {
		ch.sl.cur = ch.e
		ch.t.cur = nil
		ch.t.touchChunk(ch.sl.idx)
		if ch.e != nil {
			ch.sl.tomb = true
		}
	}
	// Published before the first mark: a writer already running may send
	// a change as soon as it is marked, and finds the chunk it converges
	// to (held.go).
	for _, ch := range changes {
		ch.t.publishChunks() // a no-op after the type's first
	}
	var touched []*client
	for _, ch := range changes {
		touched = s.markChange(ch, touched)
	}
	if first {
		s.readyNs.Store(time.Now().UnixNano())
		close(s.ready)
		for c := range s.clients {
			touched = append(touched, c) // duplicates only cost a no-op poke
		}
		s.log.Info("xds ready", "resources", len(entries))
	}
	s.views.changed(changes) // after readiness, so a woken view can read
	for _, c := range touched {
		c.poke()
	}
	s.m.apply.Observe(time.Since(start).Seconds())
}

// markChange marks an installed change pending on the watches subscribed
// to it. A changed cluster also re-marks its assignment (forced), because
// Envoy re-warms the cluster and waits for it. Server.mu held.
func (s *Server) markChange(ch change, touched []*client) []*client {
	touched = s.markSubscribers(ch.t, ch.sl, ch.e, false, touched)
	if ch.e != nil && ch.e.edsName != "" {
		if et := s.types[EndpointType]; et != nil {
			if esl := et.slots[ch.e.edsName]; esl != nil && esl.cur != nil {
				touched = s.markSubscribers(et, esl, esl.cur, true, touched)
			}
		}
	}
	return touched
}

// markSubscribers marks e (nil: removed) as sl's pending change on every
// watch of t subscribed to sl, by name or by wildcard, and collects each
// client touched once per Apply. Server.mu held.
func (s *Server) markSubscribers(t *typeState, sl *slot, e *entry, force bool, touched []*client) []*client {
	mark := func(w *watch) {
		c := w.c
		c.mu.Lock()
		w.mark(sl, e, force)
		c.mu.Unlock()
		if c.gen != s.gen {
			c.gen = s.gen
			touched = append(touched, c)
		}
	}
	sl.subs.each(func(i int) { mark(t.watches[i]) })
	for w := range t.wild {
		if !sl.subs.has(w.idx) {
			mark(w)
		}
	}
	return touched
}
