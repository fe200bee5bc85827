package envoysim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

type (
	deltaClient = grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	deltaStream = stream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
)

// deltaType is the client's protocol state for one type; guarded by
// Client.mu.
type deltaType struct {
	url     string
	stream  *deltaStream
	names   map[string]bool // explicit subscriptions ("*" for wildcard)
	started bool
}

// deltaReq is what one delta request carries besides the type and node.
type deltaReq struct {
	sub, unsub []string
	nonce      string
	nack       error
}

func (c *Client) openDelta(ctx context.Context, typeURL string) (deltaClient, error) {
	switch {
	case !c.opts.PerType:
		return discoveryv3.NewAggregatedDiscoveryServiceClient(c.conn).DeltaAggregatedResources(ctx)
	case typeURL == ClusterType:
		return clusterservice.NewClusterDiscoveryServiceClient(c.conn).DeltaClusters(ctx)
	case typeURL == EndpointType:
		return endpointservice.NewEndpointDiscoveryServiceClient(c.conn).DeltaEndpoints(ctx)
	case typeURL == ListenerType:
		return listenerservice.NewListenerDiscoveryServiceClient(c.conn).DeltaListeners(ctx)
	case typeURL == SecretType:
		return secretservice.NewSecretDiscoveryServiceClient(c.conn).DeltaSecrets(ctx)
	default:
		return routeservice.NewRouteDiscoveryServiceClient(c.conn).DeltaRoutes(ctx)
	}
}

func (c *Client) startDelta(ctx context.Context) error {
	c.delta = map[string]*deltaType{}
	var streams []*deltaStream
	for _, t := range c.types() {
		dt := &deltaType{url: t, names: map[string]bool{}}
		if !c.opts.PerType && len(streams) > 0 {
			dt.stream = streams[0]
		} else {
			s, err := c.openDelta(ctx, t)
			if err != nil {
				return fmt.Errorf("opening stream for %s: %w", t, err)
			}
			dt.stream = &deltaStream{s: s}
			streams = append(streams, dt.stream)
		}
		c.delta[t] = dt
		// A reconnecting Envoy still holds what it had.
		for name, v := range c.opts.InitialVersions[t] {
			c.heldLocked(t)[name] = entry{version: v, hash: c.opts.InitialHashes[t][name]}
		}
	}
	// The first requests go out before anything is received, so that no
	// response handler races with them.
	for _, t := range c.types() {
		var sub []string
		switch {
		case c.follows(t) != "":
			sub = c.wantLocked(t)
			if len(sub) == 0 {
				continue // subscribed when what names them arrives
			}
		case c.opts.Clusters == nil || (c.opts.Listeners && t == ListenerType):
			sub = []string{"*"}
		default:
			sub = slices.Clone(c.opts.Clusters)
		}
		if err := c.sendDelta(c.delta[t], deltaReq{sub: sub}); err != nil {
			return endedBy(c.delta[t].stream.s, err)
		}
	}
	for _, s := range streams {
		c.wg.Add(1)
		go receive(c, s, c.handleDelta)
	}
	return nil
}

// sendDelta sends one request; the first request of a type carries
// InitialVersions.
func (c *Client) sendDelta(dt *deltaType, r deltaReq) error {
	dt.stream.sendMu.Lock()
	defer dt.stream.sendMu.Unlock()
	req := &discoveryv3.DeltaDiscoveryRequest{
		TypeUrl:                  dt.url,
		ResourceNamesSubscribe:   r.sub,
		ResourceNamesUnsubscribe: r.unsub,
		ResponseNonce:            r.nonce,
	}
	c.mu.Lock()
	if !dt.started {
		req.InitialResourceVersions = maps.Clone(c.opts.InitialVersions[dt.url])
		dt.started = true
	}
	for _, n := range r.sub {
		dt.names[n] = true
	}
	for _, n := range r.unsub {
		delete(dt.names, n)
	}
	c.stats.Requests++
	c.mu.Unlock()
	req.ErrorDetail = nackStatus(r.nack)
	req.Node = c.nodeLocked(&dt.stream.sentNode)
	if err := dt.stream.s.Send(req); err != nil {
		return fmt.Errorf("sending %s delta request: %w", dt.url, err)
	}
	return nil
}

func (c *Client) handleDelta(resp *discoveryv3.DeltaDiscoveryResponse) error {
	r := Received{
		Time:    time.Now(),
		TypeURL: resp.GetTypeUrl(),
		Version: resp.GetSystemVersionInfo(),
		Nonce:   resp.GetNonce(),
		Removed: resp.GetRemovedResources(),
		Bytes:   proto.Size(resp),
	}
	c.mu.Lock()
	dt := c.delta[r.TypeURL]
	c.mu.Unlock()
	if dt == nil {
		c.ignore(r)
		return nil
	}
	res := resp.GetResources()
	anys := make([]*anypb.Any, len(res))
	for i, x := range res {
		anys[i] = x.GetResource()
	}
	rs, reject := c.decodeAll(&r, anys, func(i int) (string, string) { return res[i].GetName(), res[i].GetVersion() })

	c.mu.Lock()
	var deps []depReq
	if reject != nil {
		r.NACKed = true
	} else {
		deps = c.applyDeltaLocked(dt, rs, r.Removed)
	}
	if c.warm != nil {
		c.warm.probe()
	}
	c.recordLocked(r)
	c.mu.Unlock()

	c.observed(r, reject)
	for _, d := range deps {
		if err := c.sendDelta(d.dt, d.req); err != nil {
			return err
		}
	}
	return c.sendDelta(dt, deltaReq{nonce: r.Nonce, nack: reject})
}

// depReq is a subscription change of a type that follows another.
type depReq struct {
	dt  *deltaType
	req deltaReq
}

// applyDeltaLocked applies an accepted response. It returns the
// subscription changes of the types that follow this one (see follows).
func (c *Client) applyDeltaLocked(dt *deltaType, rs []decoded, removed []string) []depReq {
	held := c.heldLocked(dt.url)
	up := rs[:0:0]
	for _, d := range rs {
		if c.follows(dt.url) != "" && !dt.names[d.name] {
			continue // Envoy ignores assignments of clusters it does not have
		}
		held[d.name] = entry{version: d.version, hash: d.hash, msg: d.msg, refs: d.refs}
		up = append(up, d)
	}
	var gone []string
	for _, name := range removed {
		if _, ok := held[name]; !ok {
			continue
		}
		gone = append(gone, name)
		if dt.url == ClusterType {
			c.dropClusterLocked(name)
		} else {
			delete(held, name)
		}
	}
	c.warmLocked(dt.url, up, gone)
	var out []depReq
	for _, dep := range c.dependents(dt.url) {
		ds := c.delta[dep]
		want := c.wantLocked(dep)
		if dep != EndpointType {
			if gone := c.dropUnwantedLocked(dep, want); len(gone) > 0 {
				c.warmLocked(dep, nil, gone)
			}
		}
		var req deltaReq
		for _, name := range want {
			if !ds.names[name] {
				req.sub = append(req.sub, name)
			}
		}
		for name := range ds.names {
			if _, ok := slices.BinarySearch(want, name); !ok {
				req.unsub = append(req.unsub, name)
			}
		}
		if len(req.sub) == 0 && len(req.unsub) == 0 {
			continue
		}
		slices.Sort(req.unsub)
		out = append(out, depReq{dt: ds, req: req})
	}
	return out
}
