package envoysim

import (
	"context"
	"fmt"
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
)

type (
	sotwClient = grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	sotwStream = stream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
)

// sotwType is the client's protocol state for one type; fields are guarded
// by Client.mu.
type sotwType struct {
	url      string
	stream   *sotwStream
	version  string // last accepted version_info
	nonce    string // last response nonce
	names    []string
	set      map[string]bool // names, for lookups
	wildcard bool
	started  bool // a request has been sent
}

// fullState reports whether a SotW response of the type carries the whole
// set, an absent resource meaning deleted.
func fullState(typeURL string) bool { return typeURL == ClusterType || typeURL == ListenerType }

func (c *Client) openSotW(ctx context.Context, typeURL string) (sotwClient, error) {
	switch {
	case !c.opts.PerType:
		return discoveryv3.NewAggregatedDiscoveryServiceClient(c.conn).StreamAggregatedResources(ctx)
	case typeURL == ClusterType:
		return clusterservice.NewClusterDiscoveryServiceClient(c.conn).StreamClusters(ctx)
	case typeURL == EndpointType:
		return endpointservice.NewEndpointDiscoveryServiceClient(c.conn).StreamEndpoints(ctx)
	case typeURL == ListenerType:
		return listenerservice.NewListenerDiscoveryServiceClient(c.conn).StreamListeners(ctx)
	case typeURL == SecretType:
		return secretservice.NewSecretDiscoveryServiceClient(c.conn).StreamSecrets(ctx)
	default:
		return routeservice.NewRouteDiscoveryServiceClient(c.conn).StreamRoutes(ctx)
	}
}

func (c *Client) startSotW(ctx context.Context) error {
	c.sotw = map[string]*sotwType{}
	var streams []*sotwStream
	for _, t := range c.types() {
		st := &sotwType{url: t}
		switch {
		case c.follows(t) != "":
		case c.opts.Listeners && t == ListenerType:
			st.wildcard = true
		default:
			st.setNames(slices.Clone(c.opts.Clusters))
			st.wildcard = c.opts.Clusters == nil
		}
		if !c.opts.PerType && len(streams) > 0 {
			st.stream = streams[0]
		} else {
			s, err := c.openSotW(ctx, t)
			if err != nil {
				return fmt.Errorf("opening stream for %s: %w", t, err)
			}
			st.stream = &sotwStream{s: s}
			streams = append(streams, st.stream)
		}
		c.sotw[t] = st
	}
	// The first requests go out before anything is received, so that no
	// response handler races with them.
	for _, t := range c.types() {
		if c.follows(t) != "" {
			continue // subscribed when what names them arrives
		}
		if err := c.sendSotW(c.sotw[t], nil); err != nil {
			return endedBy(c.sotw[t].stream.s, err)
		}
	}
	for _, s := range streams {
		c.wg.Add(1)
		go receive(c, s, c.handleSotW)
	}
	return nil
}

// sendSotW sends the current request of a type: an ACK or a subscription
// update, or a NACK when nack is non-nil.
func (c *Client) sendSotW(st *sotwType, nack error) error {
	st.stream.sendMu.Lock()
	defer st.stream.sendMu.Unlock()
	c.mu.Lock()
	req := &discoveryv3.DiscoveryRequest{
		VersionInfo:   st.version,
		ResponseNonce: st.nonce,
		TypeUrl:       st.url,
		ResourceNames: slices.Clone(st.names),
	}
	st.started = true
	c.stats.Requests++
	c.mu.Unlock()
	req.ErrorDetail = nackStatus(nack)
	req.Node = c.nodeLocked(&st.stream.sentNode)
	if err := st.stream.s.Send(req); err != nil {
		return fmt.Errorf("sending %s request: %w", st.url, err)
	}
	return nil
}

func (c *Client) handleSotW(resp *discoveryv3.DiscoveryResponse) error {
	r := Received{
		Time:    time.Now(),
		TypeURL: resp.GetTypeUrl(),
		Version: resp.GetVersionInfo(),
		Nonce:   resp.GetNonce(),
		Bytes:   proto.Size(resp),
	}
	c.mu.Lock()
	st := c.sotw[r.TypeURL]
	c.mu.Unlock()
	if st == nil {
		c.ignore(r)
		return nil
	}
	rs, reject := c.decodeAll(&r, resp.GetResources(), nil)

	c.mu.Lock()
	st.nonce = r.Nonce
	var deps []*sotwType
	if reject != nil {
		r.NACKed = true
	} else {
		st.version = r.Version
		deps = c.applySotWLocked(st, rs)
	}
	if c.warm != nil {
		c.warm.probe()
	}
	c.recordLocked(r)
	c.mu.Unlock()

	c.observed(r, reject)
	for _, d := range deps {
		if err := c.sendSotW(d, nil); err != nil {
			return err
		}
	}
	return c.sendSotW(st, reject)
}

// applySotWLocked applies an accepted response. It returns the types
// that follow this one whose subscription changed and must be re-sent:
// EDS after CDS, RDS and SDS after LDS (see follows).
func (c *Client) applySotWLocked(st *sotwType, rs []decoded) []*sotwType {
	held := c.heldLocked(st.url)
	var removed []string
	if fullState(st.url) {
		keep := make(map[string]bool, len(rs))
		for _, d := range rs {
			keep[d.name] = true
		}
		for name := range held {
			if !keep[name] {
				removed = append(removed, name)
				if st.url == ClusterType {
					c.dropClusterLocked(name)
				} else {
					delete(held, name)
				}
			}
		}
	}
	up := rs[:0:0]
	for _, d := range rs {
		if !fullState(st.url) && !st.wildcard && !st.set[d.name] {
			continue // Envoy ignores assignments of clusters it does not have
		}
		held[d.name] = entry{version: d.version, hash: d.hash, msg: d.msg, refs: d.refs}
		up = append(up, d)
	}
	c.warmLocked(st.url, up, removed)
	var out []*sotwType
	for _, dep := range c.dependents(st.url) {
		ds := c.sotw[dep]
		want := c.wantLocked(dep)
		if dep != EndpointType {
			if gone := c.dropUnwantedLocked(dep, want); len(gone) > 0 {
				c.warmLocked(dep, nil, gone)
			}
		}
		if slices.Equal(want, ds.names) && (ds.started || len(want) == 0) {
			continue
		}
		ds.setNames(want)
		out = append(out, ds)
	}
	return out
}

func (st *sotwType) setNames(names []string) {
	st.names = names
	st.set = make(map[string]bool, len(names))
	for _, n := range names {
		st.set[n] = true
	}
}
