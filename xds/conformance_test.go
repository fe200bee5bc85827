package xds

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// The protocol conformance suite: every scenario against every variant,
// driven by the Envoy-like client.

type variant struct {
	name           string
	delta, perType bool
}

var variants = []variant{
	{"sotw-ads", false, false},
	{"delta-ads", true, false},
	{"sotw-pertype", false, true},
	{"delta-pertype", true, true},
}

// fixture is a served engine plus the resources it holds, by type and name.
type fixture struct {
	t     *testing.T
	s     *Server
	addr  string
	state map[string]map[string]proto.Message
	// perType records the clients on per-type streams, which hold the
	// clusters' per-type variant (EDS over api_config_source).
	perType map[*envoysim.Client]corev3.ApiConfigSource_ApiType
}

func newFixture(t *testing.T, rs []Resource) *fixture {
	t.Helper()
	return serveFixture(t, NewServer(Options{UnknownNameWait: 500 * time.Millisecond}), rs)
}

// serveFixture serves s with opts on loopback and applies rs to it.
func serveFixture(t *testing.T, s *Server, rs []Resource, opts ...grpc.ServerOption) *fixture {
	t.Helper()
	f := &fixture{t: t, s: s, addr: listen(t, s, opts...), state: map[string]map[string]proto.Message{},
		perType: map[*envoysim.Client]corev3.ApiConfigSource_ApiType{}}
	f.apply(rs, nil)
	return f
}

func (f *fixture) apply(up []Resource, rm []Key) {
	f.s.Apply(up, rm)
	for _, r := range up {
		if f.state[r.Type] == nil {
			f.state[r.Type] = map[string]proto.Message{}
		}
		f.state[r.Type][r.Name] = r.Message
	}
	for _, k := range rm {
		delete(f.state[k.Type], k.Name)
	}
}

func (f *fixture) client(v variant, o envoysim.Options) *envoysim.Client {
	f.t.Helper()
	o.Addr, o.Delta, o.PerType = f.addr, v.delta, v.perType
	if o.Node == "" {
		o.Node = "sim-" + v.name
	}
	c, err := envoysim.Start(context.Background(), o)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(c.Close)
	if v.perType {
		f.perType[c] = corev3.ApiConfigSource_GRPC
		if v.delta {
			f.perType[c] = corev3.ApiConfigSource_DELTA_GRPC
		}
	}
	return c
}

// converge waits until c holds exactly the fixture's clusters (or the named
// ones) and their assignments, byte for byte.
func (f *fixture) converge(c *envoysim.Client, clusters ...string) {
	f.t.Helper()
	want := map[string]map[string]uint64{}
	for _, typ := range []string{ClusterType, EndpointType} {
		want[typ] = map[string]uint64{}
		for name, m := range f.state[typ] {
			if len(clusters) > 0 && !slices.Contains(clusters, name) {
				continue
			}
			if api, ok := f.perType[c]; ok && typ == ClusterType {
				pc := proto.Clone(m).(*clusterv3.Cluster)
				pc.EdsClusterConfig.EdsConfig = APISource(api, DefaultConfigCluster)
				m = pc
			}
			h, err := envoysim.Hash(m)
			if err != nil {
				f.t.Fatal(err)
			}
			want[typ][name] = h
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	err := c.WaitFor(ctx, func(s envoysim.State) bool {
		return maps.Equal(s.Hashes[ClusterType], want[ClusterType]) && maps.Equal(s.Hashes[EndpointType], want[EndpointType])
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// received returns the responses of a type logged since index from.
func received(c *envoysim.Client, from int, typ string) []envoysim.Received {
	var out []envoysim.Received
	for _, r := range c.Log()[from:] {
		if r.TypeURL == typ {
			out = append(out, r)
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, v variant)
	}{
		{"initial state and single endpoint change", func(t *testing.T, v variant) {
			t.Helper()
			f := newFixture(t, services(100))
			c := f.client(v, envoysim.Options{})
			f.converge(c)
			mark := len(c.Log())
			f.apply([]Resource{assignment("svc-42", 1, 2)}, nil)
			f.converge(c)
			got := received(c, mark, EndpointType)
			if len(got) != 1 || len(got[0].Names) != 1 || got[0].Names[0] != "svc-42" {
				t.Fatalf("EDS responses after one change: %+v", got)
			}
			if len(received(c, mark, ClusterType)) != 0 {
				t.Fatal("CDS sent for an endpoint change")
			}
		}},
		{"service added, changed and removed", func(t *testing.T, v variant) {
			t.Helper()
			f := newFixture(t, services(5))
			c := f.client(v, envoysim.Options{})
			f.converge(c)
			f.apply([]Resource{cluster("new", time.Second), assignment("new", 1)}, nil)
			f.converge(c)
			mark := len(c.Log())
			f.apply([]Resource{cluster("svc-1", 7*time.Second)}, nil)
			f.converge(c)
			// Warming: the changed cluster's assignment is re-sent.
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			if err := c.WaitFor(ctx, func(envoysim.State) bool {
				for _, r := range received(c, mark, EndpointType) {
					if slices.Contains(r.Names, "svc-1") {
						return true
					}
				}
				return false
			}); err != nil {
				t.Fatalf("assignment not re-sent after its cluster changed: %v", err)
			}
			f.apply(nil, []Key{{ClusterType, "svc-2"}, {EndpointType, "svc-2"}})
			f.converge(c)
		}},
		{"NACKed cluster version is not re-sent", func(t *testing.T, v variant) {
			t.Helper()
			f := newFixture(t, services(3))
			bad := cluster("svc-0", 13*time.Second)
			reject := func(_ string, rs []*anypb.Any) error {
				for _, a := range rs {
					var m clusterv3.Cluster
					if a.UnmarshalTo(&m) == nil && m.GetConnectTimeout().AsDuration() == 13*time.Second {
						return errors.New("connect_timeout 13s refused")
					}
				}
				return nil
			}
			c := f.client(v, envoysim.Options{Reject: reject})
			f.converge(c)
			mark := len(c.Log())
			f.s.Apply([]Resource{bad}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			if err := c.WaitFor(ctx, func(envoysim.State) bool { return c.Stats().NACKs > 0 }); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return nackCount(f.s, ClusterType) == 1 })
			// The changed cluster's assignment is re-sent for warming
			// whatever the client makes of the cluster; on a busy machine it
			// may arrive after the NACK, so wait for it before checking that
			// the NACK itself caused nothing.
			waitFor(t, func() bool {
				for _, r := range received(c, mark, EndpointType) {
					if slices.Contains(r.Names, "svc-0") {
						return true
					}
				}
				return false
			})
			// Nothing further arrives until a real change.
			assertQuiet(t, c, 300*time.Millisecond)
			f.apply([]Resource{cluster("svc-0", 14*time.Second)}, nil)
			f.converge(c)
			n := 0
			for _, r := range received(c, mark, ClusterType) {
				if r.NACKed {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d NACKed CDS responses, want 1", n)
			}
		}},
		{"named clusters", func(t *testing.T, v variant) {
			t.Helper()
			f := newFixture(t, services(10))
			c := f.client(v, envoysim.Options{Clusters: []string{"svc-3", "svc-7"}})
			f.converge(c, "svc-3", "svc-7")
			mark := len(c.Log())
			f.apply([]Resource{assignment("svc-4", 9)}, nil)
			f.apply([]Resource{assignment("svc-3", 9)}, nil)
			f.converge(c, "svc-3", "svc-7")
			if got := received(c, mark, EndpointType); len(got) != 1 || got[0].Names[0] != "svc-3" {
				t.Fatalf("after changes of svc-4 then svc-3 got %+v", got)
			}
		}},
		{"reconnect sends nothing when nothing changed", func(t *testing.T, v variant) {
			t.Helper()
			if !v.delta {
				t.Skip("SotW has no initial_resource_versions")
			}
			f := newFixture(t, services(50))
			c := f.client(v, envoysim.Options{})
			f.converge(c)
			versions := c.Versions()
			c.Close()
			// Same server, and a second one fed the same Apply.
			f2 := newFixture(t, services(50))
			for _, fx := range []*fixture{f, f2} {
				r := fx.client(v, envoysim.Options{InitialVersions: versions, Node: "reconnect"})
				assertQuiet(t, r, 300*time.Millisecond)
				if st := r.Stats(); st.Resources != 0 || st.Removed != 0 {
					t.Fatalf("reconnect got %+v", st)
				}
				// The reconnected client holds the names without content, so
				// wait for the changed one only.
				changed := assignment("svc-9", 3)
				fx.apply([]Resource{changed}, nil)
				want, _ := envoysim.Hash(changed.Message)
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				err := r.WaitFor(ctx, func(s envoysim.State) bool { return s.Hashes[EndpointType]["svc-9"] == want })
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if st := r.Stats(); st.Resources != 1 {
					t.Fatalf("after one change: %+v", st)
				}
			}
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) { sc.run(t, v) })
			}
		})
	}
}

func nackCount(s *Server, typ string) int {
	n := 0
	for _, c := range s.Clients() {
		for _, ts := range c.Types {
			if ts.TypeURL == typ && ts.NACK != nil {
				n += ts.NACK.Count
			}
		}
	}
	return n
}

// assertQuiet fails if c receives anything within d.
func assertQuiet(t *testing.T, c *envoysim.Client, d time.Duration) {
	t.Helper()
	before := c.Stats().Responses
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if c.WaitFor(ctx, func(envoysim.State) bool { return c.Stats().Responses != before }) == nil {
		t.Fatalf("unexpected response: %+v", c.Log()[before:])
	}
}
