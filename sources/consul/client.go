package consul

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
)

// agentClient makes every request of the source to the agent: it builds
// the transports (the main one of reads, bulk queries and the probe, and
// one per watch lane), and gives each request its token, its deadline and
// the generation it runs under. It holds no state of the catalog.
type agentClient struct {
	cfg *Config
	log *slog.Logger
	tok *token
	gen *generation
	// gate is shut while the probe finds the agent down (agentMonitor):
	// the blocking queries and the watches wait at it.
	gate *gate
	// c is the main API client, of reads, bulk queries and the probe;
	// each watch lane has its own (watchSet).
	c *api.Client
	// mainTr is the main client's transport.
	mainTr *http.Transport
	// proto is the HTTP major version of the agent's last answer on the
	// main client (2: requests are multiplexed).
	proto atomic.Int32
	// conns counts every connection of every transport against the
	// agent's budget, which the source shares with the other instances
	// at its agent (budget.go); dials waiting for room give up when life
	// ends.
	conns *budgetShare
	life  context.Context
	// dial and wrap are the source's test seams (see Source).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	wrap func(http.RoundTripper) http.RoundTripper
}

// main builds the API client of reads, blocking queries and the probe,
// over a transport allowing at most limit connections to the agent and
// keeping as many idle, so that connections are reused rather than
// churned (a closed connection lingers in TIME_WAIT and still counts
// against some limits). Over HTTPS the agent speaks HTTP/2, and the
// transport then keeps every request on one connection (strict): the few
// requests of this client never need the agent's stream limit (250).
// Every response's protocol is recorded in proto.
func (a *agentClient) main(limit int) (*api.Client, *http.Transport, error) {
	c, tr, err := a.build(limit, true)
	if err == nil {
		a.c, a.mainTr = c, tr
	}
	return c, tr, err
}

// lane builds the client of one watch lane (see watchset.go): one
// connection, carrying one blocking query over HTTP/1.1, or up to
// watches_per_connection streams over HTTP/2. Each lane is a transport of
// its own because Go's HTTP/2 client, left alone, opens another
// connection whenever one carries the server's stream limit, beyond any
// bound the source promises.
func (a *agentClient) lane() (*api.Client, *http.Transport, error) {
	return a.build(1, false)
}

func (a *agentClient) build(limit int, record bool) (*api.Client, *http.Transport, error) {
	cfg := a.cfg
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:             http.ProxyFromEnvironment,
		DialContext:       dialer.DialContext,
		MaxConnsPerHost:   limit,
		ForceAttemptHTTP2: true,
		// The agent is local: compressing its answers (it gzips any but
		// the smallest when asked) would cost both sides CPU for
		// bandwidth that loopback does not need.
		DisableCompression:    true,
		MaxIdleConns:          limit,
		MaxIdleConnsPerHost:   limit,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// No ResponseHeaderTimeout: a blocking query answers after up to
		// wait + wait/16, any other request within read_timeout; the
		// context of each request carries its own deadline (request).
		HTTP2: &http.HTTP2Config{
			// Requests beyond the server's stream limit wait for a
			// stream instead of opening a connection.
			StrictMaxConcurrentRequests: true,
			// A connection carrying only blocking queries is silent
			// for minutes; pings tell a dead one from an idle one. They
			// are patient: a ping that times out closes the connection
			// and fails every watch on it at once, and an agent slow to
			// answer under load must not be mistaken for a dead one (a
			// hung agent is the probe's to find, see monitor.go).
			SendPingTimeout: pingAfter,
			PingTimeout:     pingTimeout,
		},
	}
	if a.dial != nil {
		tr.DialContext = a.dial
	}
	if a.conns != nil {
		tr.DialContext = a.conns.dialer(a.life, tr.DialContext)
	}
	tlsCfg, err := api.SetupTLSConfig(&api.TLSConfig{
		Address:            cfg.TLS.ServerName,
		CAFile:             cfg.TLS.CAFile,
		CAPath:             cfg.TLS.CAPath,
		CertFile:           cfg.TLS.CertFile,
		KeyFile:            cfg.TLS.KeyFile,
		InsecureSkipVerify: cfg.TLS.InsecureSkipVerify,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("setting up tls: %w", err)
	}
	tr.TLSClientConfig = tlsCfg
	var rt http.RoundTripper = limitBody{next: tr, max: cfg.MaxResponseBytes}
	if record {
		rt = protoRecorder{next: rt, proto: &a.proto}
	}
	if a.wrap != nil {
		rt = a.wrap(rt)
	}
	c, err := api.NewClient(&api.Config{
		Address:    cfg.Address,
		Scheme:     cfg.Scheme,
		Namespace:  cfg.Namespace,
		Partition:  cfg.Partition,
		Transport:  tr,
		HttpClient: &http.Client{Transport: rt},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating consul client: %w", err)
	}
	return c, tr, nil
}

// HTTP/2 pings: after this long without a frame from the agent, and how
// long the answer may take before the connection is given up.
const (
	pingAfter   = 30 * time.Second
	pingTimeout = 15 * time.Second
)

// protoRecorder records the HTTP major version of every response, so that
// the source knows whether the agent multiplexes requests (HTTP/2).
type protoRecorder struct {
	next  http.RoundTripper
	proto *atomic.Int32
}

func (p protoRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(req)
	if err == nil {
		p.proto.Store(int32(resp.ProtoMajor))
	}
	return resp, err
}

// queryOptions are the options common to every read in datacenter dc. The
// token goes with each request, so that a rotated token_file applies to
// the next one.
func (a *agentClient) queryOptions(ctx context.Context, dc string) *api.QueryOptions {
	q := &api.QueryOptions{
		Token:      a.tok.get(),
		Datacenter: dc,
		Namespace:  a.cfg.Namespace,
		Partition:  a.cfg.Partition,
		AllowStale: *a.cfg.Stale,
		NodeMeta:   a.cfg.NodeMeta,
	}
	return q.WithContext(ctx)
}

// boundedStale runs read, and when a stale answer came from a server that
// last heard from the leader more than max_stale ago
// (X-Consul-LastContact), runs it again from the leader, without the
// agent cache and without blocking: a lagging server must not hold the
// source in the past.
func (a *agentClient) boundedStale(q *api.QueryOptions, read func(q *api.QueryOptions) (*api.QueryMeta, error)) (*api.QueryMeta, error) {
	meta, err := read(q)
	if err != nil || !q.AllowStale || meta.LastContact <= a.cfg.MaxStale {
		return meta, err
	}
	again := *q
	again.AllowStale, again.UseCache, again.WaitIndex, again.WaitTime = false, false, 0, 0
	return read(&again)
}

// errTooLarge is the error of a read whose answer exceeds max_response_bytes.
var errTooLarge = errors.New("answer exceeds max_response_bytes")

// limitBody bounds every response body: the JSON decoder of the API client
// reads through it, and a body past max fails the read with errTooLarge
// instead of growing the heap with whatever the agent (or a proxy in
// front of it) sends.
type limitBody struct {
	next http.RoundTripper
	max  int64
}

func (l limitBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.ContentLength > l.max {
		resp.Body.Close()
		return nil, fmt.Errorf("reading %s: %w (Content-Length %d > %d)", req.URL.Path, errTooLarge, resp.ContentLength, l.max)
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: l.max, path: req.URL.Path}
	return resp, nil
}

// limitedBody fails a read once more than left bytes were read.
type limitedBody struct {
	io.ReadCloser
	left int64
	path string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("reading %s: %w", b.path, errTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1] // one byte past the limit shows that there is more
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, fmt.Errorf("reading %s: %w", b.path, errTooLarge)
	}
	return n, err
}
