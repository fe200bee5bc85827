// Package istiodsim is an xDS client that reads MCP-over-xDS config
// sources the way istiod does (istio/istio pkg/adsc, which istiod runs for
// every `xds://` entry of MeshConfig configSources), for tests of the
// bridge's Istio serving:
//
//   - one SotW ADS stream; the first request carries the node, and every
//     request a response_nonce, the initial ones a made-up one (adsc sets
//     the nonce of every request it sends, answered or not);
//   - initial requests for MeshConfig and every collection of istiod's
//     Pilot schema, each without resource names (the whole collection);
//   - every response replaces its collection in the store: a resource
//     missing from it is deleted; each resource is an Any of an MCP
//     Resource, whose metadata name is "namespace/name";
//   - every response is ACKed with its version and nonce.
//
// Unlike istiod it can NACK a response (Options.NACK), so that a test can
// check what a server does then.
package istiodsim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	mcpv1alpha1 "istio.io/api/mcp/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
)

// MeshConfig is the type URL of istiod's first initial request.
const MeshConfig = "core/v1alpha1/MeshConfig"

// PilotCollections are the collections istiod (1.24 and later) asks a
// config source for, under their current versions (istio/istio
// pkg/config/schema/collections, Pilot).
var PilotCollections = []string{
	"security.istio.io/v1/AuthorizationPolicy",
	"networking.istio.io/v1/DestinationRule",
	"networking.istio.io/v1alpha3/EnvoyFilter",
	"networking.istio.io/v1/Gateway",
	"security.istio.io/v1/PeerAuthentication",
	"networking.istio.io/v1beta1/ProxyConfig",
	"security.istio.io/v1/RequestAuthentication",
	"networking.istio.io/v1/ServiceEntry",
	"networking.istio.io/v1/Sidecar",
	"telemetry.istio.io/v1/Telemetry",
	"extensions.istio.io/v1alpha1/TrafficExtension",
	"networking.istio.io/v1/VirtualService",
	"extensions.istio.io/v1alpha1/WasmPlugin",
	"networking.istio.io/v1/WorkloadEntry",
	"networking.istio.io/v1/WorkloadGroup",
}

// Options configure a Client.
type Options struct {
	// NodeID defaults to the id istiod gives itself as a config-source
	// client: sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local.
	NodeID string
	// NACK, if set, is asked about every response; a non-empty answer is
	// sent as a NACK with that error instead of the ACK.
	NACK func(*discoveryv3.DiscoveryResponse) string
	// Light clients neither decode nor store the resources (for
	// benchmarks of the server): Response.Resources and Collection stay
	// empty.
	Light bool
}

// Resource is one resource of a collection as the client stores it.
type Resource struct {
	Version string
	Body    proto.Message
}

// Response is what the client noted of one response.
type Response struct {
	TypeURL, Version, Nonce string
	// Resources are the response's resources by "namespace/name".
	Resources map[string]Resource
	// Count is the number of resources; Bytes the response's size.
	Count, Bytes int
	NACKed       bool
	// Received is when the client had read the response off the stream,
	// before decoding its resources.
	Received time.Time
}

// Client is a running istiod-like client.
type Client struct {
	opts   Options
	stream grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every response
	store     map[string]map[string]Resource
	acked     map[string]string // last ACKed version per type
	responses []Response
	err       error // why the stream ended
	close     func()
}

// Dial connects to the xDS server at addr, sends istiod's initial requests
// and handles responses until the test ends.
func Dial(t testing.TB, addr string, opts Options) *Client {
	t.Helper()
	c, err := Connect(addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Connect is Dial for programs (benchmarks): the client runs until Close.
func Connect(addr string, opts Options) (*Client, error) {
	if opts.NodeID == "" {
		opts.NodeID = "sidecar~10.0.0.9~istiod-0.istio-system~istio-system.svc.cluster.local"
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1)))
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{opts: opts, changed: make(chan struct{}), store: map[string]map[string]Resource{}, acked: map[string]string{}}
	c.stream, err = discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		cancel()
		conn.Close()
		return nil, fmt.Errorf("opening the ADS stream: %w", err)
	}
	done := make(chan struct{})
	c.close = sync.OnceFunc(func() {
		cancel()
		<-done
		conn.Close()
	})
	node := &corev3.Node{Id: opts.NodeID, Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"GENERATOR": structpb.NewStringValue("api"), "ISTIO_VERSION": structpb.NewStringValue("1.28.0"),
	}}}
	for i, url := range append([]string{MeshConfig}, PilotCollections...) {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: url, ResponseNonce: time.Now().String()}
		if i == 0 {
			req.Node = node
		}
		if err := c.stream.Send(req); err != nil {
			cancel()
			conn.Close()
			return nil, fmt.Errorf("sending the initial request for %s: %w", url, err)
		}
	}
	go func() {
		defer close(done)
		c.run()
	}()
	return c, nil
}

// Close ends the stream and the connection (once; later calls do nothing).
func (c *Client) Close() { c.close() }

// run receives, stores and answers responses until the stream ends.
func (c *Client) run() {
	for {
		resp, err := c.stream.Recv()
		at := time.Now()
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.notify()
			c.mu.Unlock()
			return
		}
		c.handle(resp, at)
	}
}

func (c *Client) handle(resp *discoveryv3.DiscoveryResponse, at time.Time) {
	url := resp.GetTypeUrl()
	var nack string
	if c.opts.NACK != nil {
		nack = c.opts.NACK(resp)
	}
	var got map[string]Resource
	if !c.opts.Light {
		var err error
		if got, err = decode(resp); err != nil && nack == "" {
			nack = err.Error()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ack := &discoveryv3.DiscoveryRequest{TypeUrl: url, ResponseNonce: resp.GetNonce(), VersionInfo: resp.GetVersionInfo()}
	if nack != "" {
		ack.VersionInfo = c.acked[url]
		ack.ErrorDetail = &statuspb.Status{Code: 3, Message: nack}
	} else {
		c.store[url] = got
		c.acked[url] = resp.GetVersionInfo()
	}
	c.responses = append(c.responses, Response{TypeURL: url, Version: resp.GetVersionInfo(), Nonce: resp.GetNonce(),
		Resources: got, Count: len(resp.GetResources()), Bytes: proto.Size(resp), NACKed: nack != "", Received: at})
	c.notify()
	// A failed send ends the stream, which Recv reports next.
	_ = c.stream.Send(ack)
}

// decode returns the resources of an MCP response by "namespace/name".
func decode(resp *discoveryv3.DiscoveryResponse) (map[string]Resource, error) {
	out := make(map[string]Resource, len(resp.GetResources()))
	for _, a := range resp.GetResources() {
		m := &mcpv1alpha1.Resource{}
		if err := a.UnmarshalTo(m); err != nil {
			return nil, fmt.Errorf("decoding an MCP resource of %s: %w", resp.GetTypeUrl(), err)
		}
		name := m.GetMetadata().GetName()
		if strings.Count(name, "/") != 1 {
			return nil, fmt.Errorf("metadata name %q is not namespace/name", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s is in the response twice", name)
		}
		body, err := m.GetBody().UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("decoding the body of %s: %w", name, err)
		}
		out[name] = Resource{Version: m.GetMetadata().GetVersion(), Body: body}
	}
	return out, nil
}

// notify wakes every Wait. c.mu held.
func (c *Client) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Collection returns the stored collection of typeURL (read-only).
func (c *Client) Collection(typeURL string) map[string]Resource {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store[typeURL]
}

// Responses returns what the client noted of every response so far, in
// the order received.
func (c *Client) Responses() []Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Response(nil), c.responses...)
}

// Synced reports whether every initial request was answered, which is when
// istiod counts the config source as synced.
func (c *Client) Synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	answered := map[string]bool{}
	for _, r := range c.responses {
		answered[r.TypeURL] = true
	}
	for _, url := range append([]string{MeshConfig}, PilotCollections...) {
		if !answered[url] {
			return false
		}
	}
	return true
}

// Wait waits until cond holds, failing the test after timeout or when the
// stream ends first.
func (c *Client) Wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.WaitFor(ctx, cond); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s did not happen within %v; responses: %+v", what, timeout, c.Responses())
		}
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// WaitFor waits until cond holds, which it checks now and after every
// response. It returns ctx's error if ctx ends first, or an error saying
// why the stream ended if it ends first.
func (c *Client) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		changed, err := c.changed, c.err
		c.mu.Unlock()
		if cond() {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the stream ended: %w", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// HasAddress reports whether rs, a ServiceEntry or WorkloadEntry
// collection, has an endpoint of address addr: an inline endpoint of a
// ServiceEntry, or a WorkloadEntry.
func HasAddress(rs map[string]Resource, addr string) bool {
	for _, r := range rs {
		switch b := r.Body.(type) {
		case *networkingv1alpha3.WorkloadEntry:
			if b.GetAddress() == addr {
				return true
			}
		case *networkingv1alpha3.ServiceEntry:
			if slices.ContainsFunc(b.GetEndpoints(), func(e *networkingv1alpha3.WorkloadEntry) bool { return e.GetAddress() == addr }) {
				return true
			}
		}
	}
	return false
}
