package xds

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// A fleet of in-process delta ADS clients, each an Envoy with wildcard CDS
// and EDS for the clusters it got, driven synchronously: every response a
// client is owed is taken at once, so no test here waits for anything.

// scopedServices are services(n) with service j in scope j%k+1.
func scopedServices(n, k int) []Resource {
	rs := services(n)
	for i := range rs {
		rs[i].Scopes = ScopeSet(0).With(i/2%k + 1)
	}
	return rs
}

// byNodeNumber puts node-i in scope i%k+1, named scope-(i%k).
func byNodeNumber(k int) Scoper {
	return func(n *corev3.Node) (int, string) {
		i, _ := strconv.Atoi(strings.TrimPrefix(n.GetId(), "node-"))
		return i%k + 1, "scope-" + strconv.Itoa(i%k)
	}
}

// got is what a client was sent: per type URL the names upserted and the
// names removed, and the number of responses.
type got struct {
	ups, removed map[string][]string
	responses    int
}

// drainDelta takes every response c is owed.
func drainDelta(t *testing.T, c *client) got {
	t.Helper()
	g := got{ups: map[string][]string{}, removed: map[string][]string{}}
	for o := owed(c); o != nil; o = owed(c) {
		m, ok := o.msg.(*deltaMsg)
		if !ok {
			t.Fatalf("a %T on a delta stream", o.msg)
		}
		g.responses++
		for _, e := range m.list {
			g.ups[o.t.url] = append(g.ups[o.t.url], e.name)
		}
		g.removed[o.t.url] = append(g.removed[o.t.url], m.removed...)
	}
	return g
}

// fleetNode is node-i as an Envoy.
func fleetNode(i int) *corev3.Node {
	return &corev3.Node{Id: "node-" + strconv.Itoa(i), Cluster: "fleet", UserAgentName: "envoy"}
}

// connectEnvoy connects node-i with wildcard CDS, then subscribes EDS to
// the clusters it was sent, by eds (which returns the list to send: the
// codec shares identical lists, so clients with the same clusters send
// one), and returns the client and the clusters it holds, as that shared
// list (a list per client would be most of the heap measured).
func connectEnvoy(t *testing.T, s *Server, i int, eds func([]string) []string) (*client, []string) {
	t.Helper()
	c, r := s.connect(context.Background(), "delta_ads", true)
	if r != nil {
		t.Fatal(r)
	}
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: fleetNode(i), TypeUrl: ClusterType, ResourceNamesSubscribe: []string{"*"}}, nil)
	clusters := drainDelta(t, c).ups[ClusterType] // in the order of the type's slots, as a scan sends them
	list := eds(clusters)
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesSubscribe: list}, nil)
	if g := drainDelta(t, c); len(g.ups[EndpointType]) != len(clusters) {
		t.Fatalf("node-%d: %d assignments for %d clusters", i, len(g.ups[EndpointType]), len(clusters))
	}
	return c, list
}

// sharedEDSLists returns an eds function that shares one list per distinct
// set of clusters.
func sharedEDSLists(t *testing.T) func([]string) []string {
	t.Helper()
	lists := map[string][]string{}
	return func(clusters []string) []string {
		k := strings.Join(clusters, ",")
		if l, ok := lists[k]; ok {
			return l
		}
		l := share(t, slices.Clone(clusters))
		lists[k] = l
		return l
	}
}

// connectFleet connects nodes 0 to n-1 and returns the heap the clients
// after the first warm ones (warm of them, which build the shared frames)
// cost each.
func connectFleet(t *testing.T, s *Server, n, warm int) ([]*client, [][]string, uint64) {
	t.Helper()
	eds := sharedEDSLists(t)
	clients, held := make([]*client, n), make([][]string, n)
	var base uint64
	for i := range n {
		if i == warm {
			base = heapInUse()
		}
		clients[i], held[i] = connectEnvoy(t, s, i, eds)
	}
	after := heapInUse()
	if after < base {
		return clients, held, 0
	}
	return clients, held, (after - base) / uint64(n-warm)
}

const (
	fleetScopes   = 10
	fleetServices = 10000
	fleetClients  = 1000
)

// TestScopedFleet: clients of one scope hold only its clusters, share its
// tables (their heap is that of unscoped clients), a change reaches only
// the clients of its scope, narrowing a scope removes exactly the
// clusters it dropped, and a name asked for outside the scope is served.
func TestScopedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("a fleet of a thousand clients")
	}
	// The same fleet without scopes, for its heap per client.
	plain := NewServer(Options{})
	plain.Apply(services(fleetServices), nil)
	pc, _, unscoped := connectFleet(t, plain, fleetClients, 1)
	for _, c := range pc {
		plain.disconnect(c)
	}

	s := NewServer(Options{})
	s.SetScopes(byNodeNumber(fleetScopes))
	s.Apply(scopedServices(fleetServices, fleetScopes), nil)
	clients, held, scoped := connectFleet(t, s, fleetClients, fleetScopes)
	t.Logf("heap per client: %d bytes unscoped (%d clusters each), %d bytes scoped (%d clusters each)",
		unscoped, fleetServices, scoped, fleetServices/fleetScopes)
	if scoped > unscoped+unscoped/4 {
		t.Errorf("a scoped client costs %d bytes of heap, an unscoped one %d: scoped clients do not share their scope's tables", scoped, unscoped)
	}

	scopeOf := func(i int) int { return i%fleetScopes + 1 }
	for i, names := range held {
		if len(names) != fleetServices/fleetScopes {
			t.Fatalf("node-%d holds %d clusters, want its scope's %d", i, len(names), fleetServices/fleetScopes)
		}
		for _, n := range names {
			j, _ := strconv.Atoi(strings.TrimPrefix(n, "svc-"))
			if j%fleetScopes+1 != scopeOf(i) {
				t.Fatalf("node-%d (scope %d) holds %s of scope %d", i, scopeOf(i), n, j%fleetScopes+1)
			}
		}
	}
	if st := s.Clients(); len(st) != fleetClients || !slices.ContainsFunc(st, func(cs ClientStatus) bool { return cs.ID == "node-3" && cs.Scope == "scope-3" }) {
		t.Fatalf("the %d clients listed do not show node-3 in scope-3", len(st))
	}

	// pushed applies rs and returns, per client index, what it was sent.
	pushed := func(rs []Resource, removals []Key) map[int]got {
		out := map[int]got{}
		s.Apply(rs, removals)
		for i, c := range clients {
			if g := drainDelta(t, c); g.responses > 0 {
				out[i] = g
			}
		}
		return out
	}
	inScope := func(k int) []int {
		var out []int
		for i := range fleetClients {
			if scopeOf(i) == k {
				out = append(out, i)
			}
		}
		return out
	}

	t.Run("a change reaches its scope only", func(t *testing.T) {
		name := svcName(7)
		c := cluster(name, 2*time.Second)
		c.Scopes = ScopeSet(0).With(8)
		a := assignment(svcName(13), 1, 2)
		a.Scopes = ScopeSet(0).With(4)
		for _, tc := range []struct {
			what  string
			rs    []Resource
			scope int
			want  map[string][]string
		}{
			{"cluster", []Resource{c}, 8, map[string][]string{ClusterType: {name}, EndpointType: {name}}},
			{"assignment", []Resource{a}, 4, map[string][]string{EndpointType: {svcName(13)}}},
		} {
			got := pushed(tc.rs, nil)
			if want := inScope(tc.scope); !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
				t.Fatalf("the %s change was pushed to %d clients, want the %d of scope %d", tc.what, len(got), len(want), tc.scope)
			}
			for i, g := range got {
				if !maps.EqualFunc(g.ups, tc.want, slices.Equal) {
					t.Fatalf("%s: node-%d was sent %v, want %v", tc.what, i, g.ups, tc.want)
				}
			}
		}
	})

	t.Run("narrowing a scope removes what it dropped", func(t *testing.T) {
		var rs []Resource
		var dropped []string
		for j := 0; j < fleetServices; j += fleetScopes {
			if j >= fleetServices/2 {
				break
			}
			rs = append(rs, cluster(svcName(j), time.Second), assignment(svcName(j), uint32(10000+j))) // in no scope now
			dropped = append(dropped, svcName(j))
		}
		slices.Sort(dropped)
		got := pushed(rs, nil)
		if want := inScope(1); !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
			t.Fatalf("narrowing scope 1 pushed to %d clients, want its %d", len(got), len(want))
		}
		for i, g := range got {
			removed := slices.Sorted(slices.Values(g.removed[ClusterType]))
			if len(g.ups[ClusterType]) > 0 || len(g.ups[EndpointType]) > 0 || !slices.Equal(removed, dropped) {
				t.Fatalf("node-%d: upserted %d clusters and %d assignments, removed %d clusters; want only the %d dropped removed",
					i, len(g.ups[ClusterType]), len(g.ups[EndpointType]), len(removed), len(dropped))
			}
		}
	})

	t.Run("a name asked for is served outside the scope, not when denied", func(t *testing.T) {
		c := clients[0] // scope 1
		other, denied := svcName(1), svcName(2)
		d := cluster(denied, time.Second)
		d.Scopes, d.Denied = ScopeSet(0).With(3), ScopeSet(0).With(1)
		if got := pushed([]Resource{d}, nil); len(got) != 0 {
			t.Fatalf("denying %s to scope 1 pushed to %d clients; none of its clients held it", denied, len(got))
		}
		c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResourceNamesSubscribe: []string{other, denied}}, nil)
		g := drainDelta(t, c)
		if !slices.Equal(g.ups[ClusterType], []string{other}) || !slices.Equal(g.removed[ClusterType], []string{denied}) {
			t.Fatalf("asked for %s (scope 2) and %s (denied): sent %v, removed %v; want the first sent and the second answered absent",
				other, denied, g.ups[ClusterType], g.removed[ClusterType])
		}
		// The named cluster's changes follow it, though its scope is another.
		up := cluster(other, 3*time.Second)
		up.Scopes = ScopeSet(0).With(2)
		if got := pushed([]Resource{up}, nil); !slices.Equal(got[0].ups[ClusterType], []string{other}) {
			t.Fatalf("a change of %s, subscribed by name, was not sent: %v", other, got[0].ups)
		}
	})

	t.Run("a SotW wildcard lists its scope", func(t *testing.T) {
		c, r := s.connect(context.Background(), "sotw_ads", false)
		if r != nil {
			t.Fatal(r)
		}
		defer s.disconnect(c)
		c.onSotW("", &discoveryv3.DiscoveryRequest{Node: fleetNode(3), TypeUrl: ClusterType})
		list := func() []string {
			var out []string
			for o := owed(c); o != nil; o = owed(c) {
				out = nil // each response lists the whole set
				for _, e := range o.msg.(*sotwMsg).entries() {
					out = append(out, e.name)
				}
			}
			return out
		}
		names := list()
		if len(names) != fleetServices/fleetScopes || slices.ContainsFunc(names, func(n string) bool {
			j, _ := strconv.Atoi(strings.TrimPrefix(n, "svc-"))
			return j%fleetScopes+1 != 4
		}) {
			t.Fatalf("node-3 (scope 4) was sent %d clusters, want scope 4's %d and no other", len(names), fleetServices/fleetScopes)
		}
		other := cluster(svcName(4), 4*time.Second) // scope 5
		other.Scopes = ScopeSet(0).With(5)
		s.Apply([]Resource{other}, nil)
		if owed(c) != nil {
			t.Fatal("a change of another scope's cluster was pushed to a SotW client of scope 4")
		}
		for _, dc := range clients {
			drainDelta(t, dc) // scope 5's clients got it
		}
	})

	t.Run("a node moved to another scope is sent the difference", func(t *testing.T) {
		c := clients[5] // scope 6, moved to scope 7
		s.SetScopes(func(n *corev3.Node) (int, string) {
			if n.GetId() == "node-5" {
				return 7, "scope-6"
			}
			return byNodeNumber(fleetScopes)(n)
		})
		g := drainDelta(t, c)
		want := func(k int) []string {
			var out []string
			for j := k - 1; j < fleetServices; j += fleetScopes {
				out = append(out, svcName(j))
			}
			slices.Sort(out)
			return out
		}
		if ups, rem := slices.Sorted(slices.Values(g.ups[ClusterType])), slices.Sorted(slices.Values(g.removed[ClusterType])); !slices.Equal(ups, want(7)) || !slices.Equal(rem, want(6)) {
			t.Fatalf("moved from scope 6 to 7: %d clusters sent, %d removed; want scope 7's %d sent and scope 6's %d removed",
				len(ups), len(rem), len(want(7)), len(want(6)))
		}
		for i, other := range clients {
			if i != 5 && owed(other) != nil {
				t.Fatalf("node-%d, whose scope did not change, was owed a response", i)
			}
		}
		if st := s.Clients(); !slices.ContainsFunc(st, func(cs ClientStatus) bool { return cs.ID == "node-5" && cs.Scope == "scope-6" }) {
			t.Fatal("/clients does not show node-5 in its new scope")
		}
	})
}
