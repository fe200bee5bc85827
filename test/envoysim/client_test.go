package envoysim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gcp is go-control-plane's own server with a SnapshotCache, an independent
// implementation of the protocol to test the client against.
type gcp struct {
	addr  string
	cache cachev3.SnapshotCache
}

func startGCP(t *testing.T) *gcp {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	srv := serverv3.NewServer(ctx, cache, nil)
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, srv)
	clusterservice.RegisterClusterDiscoveryServiceServer(g, srv)
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, srv)
	listenerservice.RegisterListenerDiscoveryServiceServer(g, srv)
	routeservice.RegisterRouteDiscoveryServiceServer(g, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); cancel(); <-done })
	return &gcp{addr: lis.Addr().String(), cache: cache}
}

// world is a set of services: name -> endpoint ports.
type world map[string][]uint32

func cluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
	}
}

func assignment(name string, ports []uint32) *endpointv3.ClusterLoadAssignment {
	var eps []*endpointv3.LbEndpoint
	for _, p := range ports {
		eps = append(eps, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p},
				}}},
			}},
			LoadBalancingWeight: wrapperspb.UInt32(1),
		})
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints:   []*endpointv3.LocalityLbEndpoints{{LbEndpoints: eps}},
	}
}

func (g *gcp) set(t *testing.T, node, version string, w world) {
	t.Helper()
	res := map[resourcev3.Type][]types.Resource{}
	for name, ports := range w {
		res[resourcev3.ClusterType] = append(res[resourcev3.ClusterType], cluster(name))
		res[resourcev3.EndpointType] = append(res[resourcev3.EndpointType], assignment(name, ports))
	}
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// holds reports whether s holds exactly w, content included.
func holds(w world) func(State) bool {
	return func(s State) bool {
		if len(s.Clusters) != len(w) || len(s.Assignments) != len(w) {
			return false
		}
		for name, ports := range w {
			h, err := Hash(assignment(name, ports))
			if err != nil || s.Hashes[EndpointType][name] != h {
				return false
			}
			if _, ok := s.Clusters[name]; !ok {
				return false
			}
		}
		return true
	}
}

var variants = []struct {
	name           string
	delta, perType bool
}{
	{"sotw-ads", false, false},
	{"sotw-pertype", false, true},
	{"delta-ads", true, false},
	{"delta-pertype", true, true},
}

func TestConverges(t *testing.T) {
	steps := []struct {
		name string
		w    world
	}{
		{"initial", world{"a": {1, 2}, "b": {3}, "c": {4}}},
		{"endpoint change", world{"a": {1, 2}, "b": {3, 5}, "c": {4}}},
		{"cluster removed", world{"a": {1, 2}, "b": {3, 5}}},
		{"cluster added", world{"a": {1, 2}, "b": {3, 5}, "d": {}}},
	}
	for _, v := range variants {
		for _, light := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/light=%v", v.name, light), func(t *testing.T) {
				g := startGCP(t)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				g.set(t, "n1", "v0", steps[0].w)
				c, err := Start(ctx, Options{Addr: g.addr, Node: "n1", Delta: v.delta, PerType: v.perType, Light: light})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				for i, step := range steps {
					if i > 0 {
						g.set(t, "n1", fmt.Sprintf("v%d", i), step.w)
					}
					if err := c.WaitFor(ctx, holds(step.w)); err != nil {
						t.Fatalf("%s: %v", step.name, err)
					}
				}
				st := c.Stats()
				if st.NACKs != 0 || st.Responses == 0 || st.Bytes == 0 {
					t.Errorf("stats = %+v", st)
				}
				if light != (len(c.Log()) == 0) {
					t.Errorf("light=%v but log has %d entries", light, len(c.Log()))
				}
				if s := c.State(); !light && s.Clusters["a"].GetName() != "a" {
					t.Errorf("cluster a not decoded: %v", s.Clusters["a"])
				}
			})
		}
	}
}

// TestCDSBeforeEDS checks the first responses on ADS: clusters first, then
// exactly their assignments.
func TestCDSBeforeEDS(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			g := startGCP(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w := world{"a": {1}, "b": {2}}
			g.set(t, "n1", "v0", w)
			c, err := Start(ctx, Options{Addr: g.addr, Node: "n1", Delta: v.delta, PerType: v.perType})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.WaitFor(ctx, holds(w)); err != nil {
				t.Fatal(err)
			}
			log := c.Log()
			if log[0].TypeURL != ClusterType {
				t.Errorf("first response is %s", log[0].TypeURL)
			}
			var eds []string
			for _, r := range log {
				if r.TypeURL == EndpointType {
					eds = append(eds, r.Names...)
				}
			}
			slices.Sort(eds)
			if !slices.Equal(eds, []string{"a", "b"}) {
				t.Errorf("EDS names received = %v", eds)
			}
		})
	}
}

func TestNamedClusters(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			g := startGCP(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			g.set(t, "n1", "v0", world{"a": {1}, "b": {2}, "c": {3}})
			c, err := Start(ctx, Options{Addr: g.addr, Node: "n1", Delta: v.delta, PerType: v.perType, Clusters: []string{"a", "b"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if v.delta {
				// go-control-plane's SotW SnapshotCache in ADS mode holds a
				// named CDS request until the names cover every cluster of
				// the snapshot, so it never answers this one; only delta
				// can be checked against it.
				if err := c.WaitFor(ctx, holds(world{"a": {1}, "b": {2}})); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestNACK(t *testing.T) {
	bad := errors.New("cluster bad refused")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			g := startGCP(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			good := world{"a": {1}}
			g.set(t, "n1", "v0", good)
			reject := func(_ string, rs []*anypb.Any) error {
				for _, a := range rs {
					if n, _ := wireName(a.GetValue()); string(n) == "bad" {
						return bad
					}
				}
				return nil
			}
			c, err := Start(ctx, Options{Addr: g.addr, Node: "n1", Delta: v.delta, PerType: v.perType, Reject: reject})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.WaitFor(ctx, holds(good)); err != nil {
				t.Fatal(err)
			}
			g.set(t, "n1", "v1", world{"a": {1}, "bad": {2}})
			nacked := func(State) bool { return c.Stats().NACKs > 0 }
			if err := c.WaitFor(ctx, nacked); err != nil {
				t.Fatal(err)
			}
			if s := c.State(); !holds(good)(s) {
				t.Errorf("NACKed response applied: %s", s.Summary())
			}
			next := world{"a": {1, 7}, "c": {3}}
			g.set(t, "n1", "v2", next)
			if err := c.WaitFor(ctx, holds(next)); err != nil {
				t.Fatal(err)
			}
			var sawNACK bool
			for _, r := range c.Log() {
				sawNACK = sawNACK || (r.NACKed && slices.Contains(r.Names, "bad"))
			}
			if !sawNACK {
				t.Error("log has no NACKed response naming bad")
			}
		})
	}
}

// TestDeltaReconnect starts a second client with the first one's versions:
// it holds the names at once and receives only what changes afterwards.
func TestDeltaReconnect(t *testing.T) {
	for _, perType := range []bool{false, true} {
		t.Run(fmt.Sprintf("perType=%v", perType), func(t *testing.T) {
			g := startGCP(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w := world{"a": {1}, "b": {2}}
			g.set(t, "n1", "v0", w)
			first, err := Start(ctx, Options{Addr: g.addr, Node: "n1", Delta: true, PerType: perType})
			if err != nil {
				t.Fatal(err)
			}
			if err := first.WaitFor(ctx, holds(w)); err != nil {
				t.Fatal(err)
			}
			versions := first.State().Versions
			first.Close()

			second, err := Start(ctx, Options{Addr: g.addr, Node: "n1", Delta: true, PerType: perType, InitialVersions: versions})
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			if s := second.State(); len(s.Clusters) != 2 || len(s.Assignments) != 2 {
				t.Fatalf("reconnected client does not hold its initial names: %s", s.Summary())
			}
			w2 := world{"a": {1}, "b": {2, 3}}
			g.set(t, "n1", "v1", w2)
			hb, _ := Hash(assignment("b", w2["b"]))
			if err := second.WaitFor(ctx, func(s State) bool { return s.Hashes[EndpointType]["b"] == hb }); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range second.Log() {
				got = append(got, r.Names...)
			}
			if !slices.Equal(got, []string{"b"}) {
				t.Errorf("resources received after reconnect = %v, want [b]", got)
			}
		})
	}
}

func TestWaitForReportsState(t *testing.T) {
	g := startGCP(t)
	g.set(t, "n1", "v0", world{"a": {1}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Addr: g.addr, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitFor(ctx, holds(world{"a": {1}})); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	err = c.WaitFor(short, func(State) bool { return false })
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if want := "a@v0"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not describe the state (%s)", err, want)
	}
}

// TestExtraTypes subscribes to listeners and routes by the cluster names,
// as a proxyless gRPC client names them after the service.
func TestExtraTypes(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			g := startGCP(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := map[resourcev3.Type][]types.Resource{}
			for _, name := range []string{"a", "b"} {
				res[resourcev3.ClusterType] = append(res[resourcev3.ClusterType], cluster(name))
				res[resourcev3.EndpointType] = append(res[resourcev3.EndpointType], assignment(name, []uint32{1}))
				res[resourcev3.ListenerType] = append(res[resourcev3.ListenerType], &listenerv3.Listener{Name: name})
				res[resourcev3.RouteType] = append(res[resourcev3.RouteType], &routev3.RouteConfiguration{Name: name})
			}
			snap, err := cachev3.NewSnapshot("v0", res)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.cache.SetSnapshot(ctx, "n1", snap); err != nil {
				t.Fatal(err)
			}
			c, err := Start(ctx, Options{Addr: g.addr, Node: "n1", Delta: v.delta, PerType: v.perType,
				Clusters: []string{"a", "b"}, Types: []string{ListenerType, RouteType}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.WaitFor(ctx, func(s State) bool {
				return len(s.Resources[ListenerType]) == 2 && len(s.Resources[RouteType]) == 2 && holds(world{"a": {1}, "b": {1}})(s)
			})
			if err != nil {
				t.Fatal(err)
			}
			if l := c.State().Resources[ListenerType]["a"]; l.GetTypeUrl() != ListenerType {
				t.Errorf("listener a = %v", l)
			}
		})
	}
	if _, err := Start(context.Background(), Options{Addr: "127.0.0.1:1", Types: []string{"type.googleapis.com/x"}}); err == nil {
		t.Error("unsupported extra type accepted")
	}
}

// TestInternShares checks Options.Intern: Light clients sharing an
// Interner converge as others do, through a change, and hold each name and
// version in one copy between them.
func TestInternShares(t *testing.T) {
	steps := []world{{"a": {1, 2}, "b": {3}}, {"a": {1, 2}, "b": {3, 5}}}
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			g := startGCP(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			g.set(t, "n1", "v0", steps[0])
			in := NewInterner()
			var cs []*Client
			for range 2 {
				c, err := Start(ctx, Options{Addr: g.addr, Node: "n1", Delta: delta, Light: true, Intern: in})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				cs = append(cs, c)
			}
			for i, w := range steps {
				if i > 0 {
					g.set(t, "n1", fmt.Sprintf("v%d", i), w)
				}
				for _, c := range cs {
					if err := c.WaitFor(ctx, holds(w)); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
			}
			type str struct{ name, version *byte }
			copies := func(c *Client) map[string]str {
				out := map[string]str{}
				for typ, vs := range c.Versions() {
					for name, v := range vs {
						out[typ+"/"+name] = str{unsafe.StringData(name), unsafe.StringData(v)}
					}
				}
				return out
			}
			a, b := copies(cs[0]), copies(cs[1])
			if len(a) != 4 {
				t.Fatalf("client holds %d resources, want 4", len(a))
			}
			for k, s := range a {
				if b[k] != s {
					t.Errorf("%s: the clients hold separate copies of its name or version", k)
				}
			}
		})
	}
}
