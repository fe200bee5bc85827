package xds

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// share marks names as a list the codec hands out to several requests, as
// Codec does with the identical lists of a fleet.
func share(t *testing.T, names []string) []string {
	t.Helper()
	if len(names) > 0 {
		t.Cleanup(wire.Share(names))
	}
	return names
}

// TestScanChunkFit: the scan takes a chunk as a whole only when the chunks
// alone say what the name-by-name comparison would conclude.
func TestScanChunkFit(t *testing.T) {
	const n = 200 // chunks 0-2 full, chunk 3 holds 8 slots
	setup := func(t *testing.T, sub []string) (*Server, *client, *watch, *frame) {
		t.Helper()
		s := NewServer(Options{})
		s.Apply(services(n), nil)
		c, r := s.connect(context.Background(), "delta_ads", true)
		if r != nil {
			t.Fatal(r)
		}
		t.Cleanup(func() { s.disconnect(c) })
		typ := EndpointType
		if sub[0] == "*" {
			typ = ClusterType
		}
		c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: sub}, nil)
		w := c.watches[typ]
		if w.scan == nil {
			t.Fatal("no scan queued")
		}
		return s, c, w, w.scan
	}
	t.Run("a wildcard holds the shared twins, and lacks every chunk", func(t *testing.T) {
		_, _, w, f := setup(t, []string{"*"})
		for k := range f.tab {
			if w.sent.dense[k] != f.tab[k].none {
				t.Errorf("chunk %d: not the type's twin", k)
			}
			if got := w.fit(f, k); got != lacksAll {
				t.Errorf("chunk %d: %v, want lacksAll", k, got)
			}
		}
	})
	t.Run("every name, subscribed one by one, lacks every chunk", func(t *testing.T) {
		_, _, w, f := setup(t, manyNames(n))
		for k := range f.tab {
			if got := w.fit(f, k); got != lacksAll {
				t.Errorf("chunk %d: %v, want lacksAll", k, got)
			}
		}
	})
	t.Run("every name, a shared list, takes the shared twins", func(t *testing.T) {
		_, _, w, f := setup(t, share(t, manyNames(n)))
		for k := range f.tab {
			if w.sent.dense[k] != f.tab[k].none {
				t.Errorf("chunk %d: not the type's twin", k)
			}
		}
		if w.sent.len() != n {
			t.Errorf("sent set counts %d, want %d", w.sent.len(), n)
		}
	})
	t.Run("a shared list naming one twice counts it once", func(t *testing.T) {
		names := manyNames(n)
		names = append(names[:6:6], names[5:]...) // svc-5 twice, in slot order
		_, _, w, _ := setup(t, share(t, names))
		if w.sent.len() != n {
			t.Errorf("sent set counts %d, want %d", w.sent.len(), n)
		}
	})
	t.Run("a shared list over the names-per-subscription limit is still refused", func(t *testing.T) {
		s := NewServer(Options{Limits: Limits{NamesPerSubscription: n - 1}})
		s.Apply(services(n), nil)
		c, _ := s.connect(context.Background(), "delta_ads", true)
		defer s.disconnect(c)
		if r := c.deltaRequest("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: share(t, manyNames(n))}, wire.InitialVersions{}); r == nil || r.reason != reasonNamesPerSub {
			t.Fatalf("refusal %v, want %s", r, reasonNamesPerSub)
		}
	})
	t.Run("a chunk with a name left out, or an unknown name, is compared name by name", func(t *testing.T) {
		names := append(manyNames(n)[1:], "unknown") // svc-0 (chunk 0) out; the unknown name's slot is in chunk 3
		_, _, w, f := setup(t, names)
		want := []chunkFit{perName, lacksAll, lacksAll, perName}
		for k := range f.tab {
			if got := w.fit(f, k); got != want[k] {
				t.Errorf("chunk %d: %v, want %v", k, got, want[k])
			}
		}
	})
	t.Run("a pending change sends its chunk name by name", func(t *testing.T) {
		_, c, w, f := setup(t, manyNames(n))
		c.mu.Lock()
		w.dirty[f.slots[70]] = pend{} // chunk 1
		in, other := w.fit(f, 1), w.fit(f, 2)
		for _, sl := range f.slots[100:120] {
			w.dirty[sl] = pend{} // many pending changes: every chunk
		}
		many := w.fit(f, 0)
		clear(w.dirty)
		c.mu.Unlock()
		if in != perName || other != lacksAll || many != perName {
			t.Errorf("with a dirty name: its chunk %v, another %v, with many %v; want perName, lacksAll, perName", in, other, many)
		}
	})
	t.Run("a whole chunk sent ends the waits of its names", func(t *testing.T) {
		_, c, w, f := setup(t, manyNames(n))
		c.mu.Lock()
		w.waiting[f.slots[70]] = waitSince{}
		got := w.fit(f, 1)
		c.mu.Unlock()
		if got != lacksAll {
			t.Fatalf("with a waiting name %v, want lacksAll", got)
		}
		for owed(c) != nil {
		}
		if _, ok := w.waiting[f.slots[70]]; ok {
			t.Error("the name was sent and still waits")
		}
	})
	t.Run("a client served a variant never takes a chunk", func(t *testing.T) {
		_, c, w, f := setup(t, manyNames(n))
		c.rewrite = &Rewrite{}
		defer func() { c.rewrite = nil }()
		if got := w.fit(f, 1); got != perName {
			t.Errorf("%v, want perName", got)
		}
	})
	t.Run("once sent, the watch holds every chunk", func(t *testing.T) {
		_, c, w, f := setup(t, manyNames(n))
		for owed(c) != nil {
		}
		for k := range f.tab {
			if got := w.fit(f, k); got != sentAll {
				t.Errorf("chunk %d: %v, want sentAll", k, got)
			}
		}
	})
}

// TestScanMatchesModel drives delta clients through random subscriptions,
// changes, removals, reconnects and partial drains, with and without a
// response size limit, and checks after full drains that every
// client holds exactly the current entries of what it subscribes to and
// that the server's sent set agrees. Whole-chunk scans and name-by-name
// comparisons must be indistinguishable here.
func TestScanMatchesModel(t *testing.T) {
	const n, extra = 300, 100 // names svc-0..svc-399; 300 exist at first
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			opts := Options{}
			if seed%2 == 1 {
				opts.MaxResponseBytes = 3000
			}
			s := NewServer(opts)
			s.Apply(services(n), nil)
			m := &scanModel{t: t, s: s, view: map[string]map[string]string{}}
			m.reconnect(nil, nil)
			subscribed := map[string]bool{}
			first := manyNames(n + extra)[:rng.IntN(n+extra)+1]
			if rng.IntN(2) == 0 {
				first = manyNames(n) // the usual first request: every name
			}
			if rng.IntN(2) == 0 {
				first = share(t, first) // as the codec gives a fleet's lists
			}
			m.request(EndpointType, first, nil)
			for _, name := range first {
				subscribed[name] = true
			}
			for step := range 200 {
				switch op := rng.IntN(20); {
				case op < 6:
					var up []Resource
					var rm []Key
					for range rng.IntN(8) + 1 {
						name := svcName(rng.IntN(n + extra))
						switch rng.IntN(4) {
						case 0:
							rm = append(rm, Key{ClusterType, name}, Key{EndpointType, name})
						case 1:
							up = append(up, cluster(name, time.Duration(step+1)*time.Millisecond))
						default:
							up = append(up, assignment(name, uint32(step), uint32(rng.IntN(1000))))
						}
					}
					s.Apply(up, rm)
				case op < 9:
					var sub, unsub []string
					picked := map[string]bool{} // a name in both lists is not a request a client sends
					for range rng.IntN(70) + 1 {
						name := svcName(rng.IntN(n + extra))
						if picked[name] {
							continue
						}
						picked[name] = true
						if subscribed[name] && rng.IntN(2) == 0 {
							unsub = append(unsub, name)
							delete(subscribed, name)
						} else if !subscribed[name] {
							sub = append(sub, name)
							subscribed[name] = true
						}
					}
					m.request(EndpointType, sub, unsub)
				case op < 10:
					m.reconnect(subscribed, rng)
				case op < 11:
					m.drain(-1)
					m.check(subscribed)
				default:
					m.drain(rng.IntN(3))
				}
			}
			m.drain(-1)
			m.check(subscribed)
		})
	}
}

// scanModel is one delta ADS client of a test server (wildcard CDS, named
// EDS) and what it holds by the responses it received.
type scanModel struct {
	t    *testing.T
	s    *Server
	c    *client
	view map[string]map[string]string // type → name → version received
}

func (m *scanModel) request(typ string, sub, unsub []string) {
	m.c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub}, nil)
	if r := m.c.refused.Load(); r != nil {
		m.t.Fatalf("request refused: %v", r)
	}
	for _, name := range unsub {
		delete(m.view[typ], name) // a client forgets what it unsubscribes from
	}
}

// reconnect replaces the client by a new stream that claims what the old
// one held (nil subscribed: the first connection).
func (m *scanModel) reconnect(subscribed map[string]bool, rng *rand.Rand) {
	if m.c != nil {
		m.s.disconnect(m.c)
	}
	c, r := m.s.connect(context.Background(), "delta_ads", true)
	if r != nil {
		m.t.Fatal(r)
	}
	m.c = c
	for _, typ := range []string{ClusterType, EndpointType} {
		if m.view[typ] == nil {
			m.view[typ] = map[string]string{}
		}
		initial := map[string]string{}
		for name, v := range m.view[typ] {
			if rng != nil && rng.IntN(10) == 0 {
				v = "forgotten" // a version the server never had: sent again
			}
			initial[name] = v
		}
		if typ == ClusterType {
			c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: initial}, nil)
			continue
		}
		if subscribed == nil {
			continue // the first EDS request comes from the test
		}
		var sub []string
		for name := range subscribed {
			sub = append(sub, name)
		}
		slices.SortFunc(sub, func(a, b string) int { // svc-N by N: mostly slot order
			return cmp.Compare(len(a), len(b))*2 + cmp.Compare(a, b)
		})
		if rng.IntN(2) == 0 {
			sub = share(m.t, sub)
		}
		if len(sub) > 0 {
			c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: sub, InitialResourceVersions: initial}, nil)
		}
		// Names held but no longer subscribed are forgotten by the client.
		for name := range m.view[typ] {
			if !subscribed[name] {
				delete(m.view[typ], name)
			}
		}
	}
}

// drain takes up to k responses (k < 0: all the client is owed).
func (m *scanModel) drain(k int) {
	for ; k != 0; k-- {
		o := owed(m.c)
		if o == nil {
			return
		}
		list, removed, _ := wireOf(m.t, o.msg)
		v := m.view[o.t.url]
		seen := map[string]bool{}
		for _, e := range list {
			if seen[e.name] {
				m.t.Fatalf("a response carries %s twice", e.name)
			}
			seen[e.name] = true
			v[e.name] = e.version
		}
		for _, name := range removed {
			delete(v, name)
		}
	}
}

// check compares the client's view and the server's sent set with the
// current entries: every cluster, and the assignments subscribed to.
func (m *scanModel) check(subscribed map[string]bool) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	for _, typ := range []string{ClusterType, EndpointType} {
		want := map[string]string{}
		ts := m.s.types[typ]
		for _, sl := range ts.byIdx.all() {
			if sl != nil && sl.cur != nil && (typ == ClusterType || subscribed[sl.name]) {
				want[sl.name] = sl.cur.version
			}
		}
		got := m.view[typ]
		for name, v := range want {
			if got[name] != v {
				m.t.Errorf("%s %s: client holds %q, current %q", typ, name, got[name], v)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				m.t.Errorf("%s %s: client holds %q, not current or not subscribed", typ, name, got[name])
			}
		}
		w := m.c.watches[typ]
		if w == nil {
			continue
		}
		present := 0
		for sl, e := range w.sent.all() {
			present++
			if e != nil && got[sl.name] != e.version {
				m.t.Errorf("%s %s: server thinks the client holds %q, it holds %q", typ, sl.name, e.version, got[sl.name])
			}
			if typ == EndpointType && !subscribed[sl.name] {
				m.t.Errorf("%s %s: in the sent set, not subscribed", typ, sl.name)
			}
		}
		if present != w.sent.len() {
			m.t.Errorf("%s: sent set counts %d, holds %d", typ, w.sent.len(), present)
		}
		if typ == EndpointType {
			for name := range subscribed {
				if sl := ts.slots[name]; sl == nil || !w.sent.has(sl) {
					m.t.Errorf("%s %s: subscribed, not in the sent set", typ, name)
				}
			}
		}
	}
}

// TestScanSendsNoReplacedEntry: a name subscribed while a scan is pending,
// after a change the watch was not marked with, is not sent the entry the
// change replaced, whether its chunk goes whole or name by name.
func TestScanSendsNoReplacedEntry(t *testing.T) {
	const n = 200
	for _, limit := range []int{0, 2048} { // whole chunks; name by name
		for _, removed := range []bool{true, false} {
			t.Run(fmt.Sprintf("limit %d removed %v", limit, removed), func(t *testing.T) {
				s := NewServer(Options{MaxResponseBytes: limit})
				s.Apply(services(n), nil)
				c, _ := s.connect(context.Background(), "delta_ads", true)
				defer s.disconnect(c)
				late := svcName(70) // chunk 1
				var first []string
				for _, name := range manyNames(n) {
					if name != late {
						first = append(first, name)
					}
				}
				c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: first}, nil)
				var old string
				s.mu.Lock()
				old = s.types[EndpointType].slots[late].cur.version
				s.mu.Unlock()
				if removed {
					s.Apply(nil, []Key{{EndpointType, late}})
				} else {
					s.Apply([]Resource{assignment(late, 1, 2, 3)}, nil)
				}
				c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesSubscribe: []string{late}}, nil)
				for o := owed(c); o != nil; o = owed(c) {
					list, _, _ := wireOf(t, o.msg)
					for _, e := range list {
						if e.name == late && e.version == old {
							t.Fatalf("%s sent its replaced version", late)
						}
					}
				}
			})
		}
	}
}

// TestAppendFrame: a response continuing the frame's list is the frame's
// list itself; anything else copies, and the frame is never written.
func TestAppendFrame(t *testing.T) {
	entries := make([]*entry, 200)
	for i := range entries {
		entries[i] = &entry{name: svcName(i)}
	}
	orig := append([]*entry(nil), entries...)
	ups := appendFrame(nil, entries, 0, 64)
	ups = appendFrame(ups, entries, 64, 128)
	if &ups[0] != &entries[0] || len(ups) != 128 {
		t.Fatal("a continuous run was copied")
	}
	other := &entry{name: "other"}
	ups2 := append(ups, other) // as the name-by-name path and the dirty map do
	ups3 := appendFrame(ups, entries, 150, 200)
	if entries[128] != orig[128] || entries[150] != orig[150] {
		t.Fatal("an append wrote into the frame")
	}
	if len(ups2) != 129 || ups2[128] != other || len(ups3) != 178 || ups3[128] != entries[150] {
		t.Fatalf("appends lost entries: %d %d", len(ups2), len(ups3))
	}
}

// TestScanMatchesModelClients drives an Envoy and a proxyless gRPC client
// (delta ADS, wildcard CDS, EDS by name and by wildcard) side by side
// through random changes, subscriptions, wildcard toggles, reconnects with
// claims and partial drains, over resources some of which are gRPC-only or
// have a gRPC variant, with small name limits in some seeds. After full
// drains each client must hold exactly what its node class sees of the
// current entries it subscribes to, the server's sent sets must agree,
// every name subscribed must have been answered (or be waiting for its
// bounded wait), and a reconnect must not be sent what it correctly claimed.
func TestScanMatchesModelClients(t *testing.T) {
	const n, extra = 300, 100 // names svc-0..svc-399; 300 exist at first
	st := &fleetStats{refused: map[string]int{}}
	for seed := range uint64(18) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			opts := Options{}
			if seed%2 == 1 {
				opts.MaxResponseBytes = 3000
			}
			switch seed / 2 % 3 { // at most one small limit, so the reason refused is known
			case 1:
				opts.Limits.NamesPerSubscription = 150 + rng.IntN(140)
			case 2:
				opts.Limits.UnknownNames = 5 + rng.IntN(40)
			}
			s := NewServer(opts)
			m := &fleetModel{t: t, s: s, rng: rng, st: st}
			initial := services(n)
			for range 8 { // a few resources of the variant chunks for gRPC only, or with a gRPC variant
				i := variantNum(rng, n, extra)
				if i >= n {
					continue
				}
				kind := rng.IntN(4)
				initial[2*i+kind/2] = m.resource(kind, svcName(i), 0) // services: cluster, assignment
			}
			s.Apply(initial, nil)
			m.clients = []*fleetClient{{grpc: false}, {grpc: true}}
			for _, fc := range m.clients {
				m.fresh(fc)
				first := manyNames(n + extra)[:rng.IntN(n+extra)+1]
				if rng.IntN(2) == 0 {
					first = manyNames(n) // the usual first request: every name
				}
				if rng.IntN(4) == 0 {
					first = append([]string{"*"}, first[:rng.IntN(len(first))]...)
				}
				if rng.IntN(2) == 0 || seed/2%3 != 0 { // with a small limit, a shared list may be refused
					first = share(t, first)
				}
				m.send(fc, EndpointType, first, nil, nil, nil)
			}
			for step := range 300 {
				fc := m.clients[rng.IntN(len(m.clients))]
				switch op := rng.IntN(24); {
				case op < 6:
					m.apply(n, extra, step)
				case op < 10:
					m.subscribe(fc, n+extra)
				case op < 12:
					m.toggleWildcard(fc, n+extra)
				case op < 14: // whole chunks, then a reconnect that holds them or not
					m.subscribeChunks(fc, n+extra)
					if rng.IntN(2) == 0 {
						m.drain(fc, -1)
					}
					m.reconnect(fc)
				case op < 15:
					m.reconnect(fc)
				case op < 16:
					m.drainAll()
					m.check()
				default:
					m.drain(fc, rng.IntN(3))
				}
			}
			m.drainAll()
			m.check()
		})
	}
	t.Logf("coverage: %+v", *st)
	for what, got := range map[string]int{
		"refusals for names_per_subscription":             st.refused[reasonNamesPerSub],
		"refusals for unknown_names":                      st.refused[reasonUnknownNames],
		"shared first requests refused":                   st.sharedFirstRefused,
		"EDS wildcards turned on":                         st.wildOn,
		"EDS wildcards turned off":                        st.wildOff,
		"explicit unsubscribes under a wildcard":          st.unsubUnderWild,
		"chunks claimChunks took":                         st.claimTaken,
		"whole chunks skipped for claims":                 st.claimSkipped,
		"wildcard chunks skipped for claims":              st.wildSkipped,
		"gRPC variants held":                              st.variantHeld,
		"gRPC-only resources hidden":                      st.hiddenHeld,
		"non-plain chunks subscribed whole":               st.nonPlainWhole,
		"gRPC-only chunks an Envoy reconnect names whole": st.nonPlainClaimable,
		"subscriptions answered by a removal":             st.hiddenAnswered,
	} {
		if got == 0 {
			t.Errorf("no %s: the test lost that coverage", what)
		}
	}
}

// fleetStats count what the model test exercised, over all seeds.
type fleetStats struct {
	refused            map[string]int
	sharedFirstRefused int
	wildOn, wildOff    int
	unsubUnderWild     int
	claimTaken         int // chunks claimChunks took on a reconnect
	claimSkipped       int // chunks it would have taken but for the claims held there
	wildSkipped        int // chunks a wildcard's subscribeChunk would have taken but for claims
	variantHeld        int // gRPC variants a gRPC client holds at a check
	hiddenHeld         int // gRPC-only resources an Envoy subscribes to at a check
	nonPlainWhole      int // chunks with gRPC-only or variant entries a client subscribes to whole
	nonPlainClaimable  int // such chunks, with gRPC-only entries, an Envoy reconnect names whole, claiming nothing there
	hiddenAnswered     int // removals answering a subscription to a name that had a resource
	mayRefused         int // refusals for unknown names that got a resource since pinned
	firstUnanswered    int // subscriptions of a first request left unanswered (the defect)
	checks             int
}

// fleetModel is a test server and its delta ADS clients, with what each
// holds by the responses it received.
type fleetModel struct {
	t       *testing.T
	s       *Server
	rng     *rand.Rand
	clients []*fleetClient
	st      *fleetStats
	// responses counts the responses drained.
	responses int
}

type fleetClient struct {
	grpc    bool
	c       *client
	view    map[string]map[string]string // type → name → version received
	named   map[string]bool              // EDS names subscribed by name
	wild    bool                         // EDS subscribed to "*"
	started bool                         // the stream sent its first EDS request
	// asked are EDS names subscribed and not yet answered (an entry or a
	// removal).
	asked map[string]asked
	// pendRm are names without a resource unsubscribed under the wildcard
	// whose removal is still owed: pinned until it is sent.
	pendRm map[string]bool
	// pinned are names the stream made the server pin as unknown (asked
	// for while they had no resource): true while the name has had no
	// resource since, false once it got one, when the pin may still be
	// there or not: it outlives the resource while a change of the name is
	// pending or it waits (watch.sweep).
	pinned map[string]bool
	// claimed are what the last reconnect claimed at the current version,
	// until the next change or request: not to be sent again.
	claimed map[string]map[string]string
}

// asked is a subscription not yet answered: whether its name had a
// resource then, visible to the client or not, and whether a stream's
// first EDS request made it.
type asked struct{ known, visible, first bool }

func (fc *fleetClient) node() *corev3.Node {
	if fc.grpc {
		return grpcNode
	}
	return envoyNode
}

// seenBy is e as a client of that class must see it (nil: hidden): the
// rule of Resource.For, written out again.
func seenBy(e *entry, grpc bool) *entry {
	switch {
	case e == nil || e.grpcOnly && !grpc:
		return nil
	case grpc && e.grpc != nil:
		return e.grpc
	}
	return e
}

// variantNum picks a name that may be gRPC-only or have a gRPC variant:
// chunks 0 and 2 and the names beyond the first n; chunks 1 and 3 stay
// plain, so that whole-chunk paths are taken too.
func variantNum(rng *rand.Rand, n, extra int) int {
	switch rng.IntN(3) {
	case 0:
		return rng.IntN(chunkLen)
	case 1:
		return 2*chunkLen + rng.IntN(chunkLen)
	}
	return n + rng.IntN(extra)
}

// resource builds kind 0: a gRPC-only cluster, 1: a cluster with a gRPC
// variant, 2: a gRPC-only assignment, 3: an assignment with a gRPC variant.
func (m *fleetModel) resource(kind int, name string, step int) Resource {
	switch kind {
	case 0:
		r := cluster(name, time.Duration(step+1)*time.Millisecond)
		r.GRPCOnly = true
		return r
	case 1:
		return withGRPCVariant(cluster(name, time.Duration(step+1)*time.Millisecond), time.Duration(step+1)*time.Second)
	case 2:
		r := assignment(name, uint32(step), uint32(m.rng.IntN(1000)))
		r.GRPCOnly = true
		return r
	}
	r := assignment(name, uint32(step), uint32(m.rng.IntN(1000)))
	r.GRPC = assignment(name, uint32(step), 7, uint32(m.rng.IntN(1000))).Message
	return r
}

func (m *fleetModel) apply(n, extra, step int) {
	var up []Resource
	var rm []Key
	for range m.rng.IntN(8) + 1 {
		i := m.rng.IntN(n + extra)
		if m.rng.IntN(3) == 0 {
			i = variantNum(m.rng, n, extra)
		}
		name := svcName(i)
		variantOK := i < chunkLen || (i >= 2*chunkLen && i < 3*chunkLen) || i >= n
		switch k := m.rng.IntN(8); {
		case k == 0:
			rm = append(rm, Key{ClusterType, name}, Key{EndpointType, name})
		case k < 3:
			up = append(up, cluster(name, time.Duration(step+1)*time.Millisecond))
		case k < 5 && variantOK:
			up = append(up, m.resource(m.rng.IntN(4), name, step))
		default:
			up = append(up, assignment(name, uint32(step), uint32(m.rng.IntN(1000))))
		}
	}
	m.s.Apply(up, rm)
	for _, fc := range m.clients {
		fc.claimed = nil
		for _, r := range up {
			if _, ok := fc.pinned[r.Name]; ok && r.Type == EndpointType && m.has(r.Name) {
				fc.pinned[r.Name] = false
			}
		}
	}
}

// has reports whether the server has an EDS resource of that name.
func (m *fleetModel) has(name string) bool {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	sl := m.s.types[EndpointType].slots[name]
	return sl != nil && sl.cur != nil
}

// pick returns up to k distinct names of 0..names-1 in random order.
func (m *fleetModel) pick(k, names int) []string {
	var out []string
	seen := map[int]bool{}
	for range k {
		if i := m.rng.IntN(names); !seen[i] {
			seen[i] = true
			out = append(out, svcName(i))
		}
	}
	return out
}

// subscribe subscribes and unsubscribes random names (unsubscribing only
// names subscribed by name: the client forgets what it unsubscribes from).
func (m *fleetModel) subscribe(fc *fleetClient, names int) {
	var sub, unsub []string
	for _, name := range m.pick(m.rng.IntN(70)+1, names) {
		switch {
		case fc.named[name] && fc.started && m.rng.IntN(2) == 0:
			unsub = append(unsub, name)
		case !fc.named[name]:
			sub = append(sub, name)
		}
	}
	if len(sub) > 1 && m.rng.IntN(4) == 0 {
		sub = share(m.t, sub)
	}
	if len(sub)+len(unsub) > 0 {
		m.send(fc, EndpointType, sub, unsub, nil, nil)
	}
}

// toggleWildcard subscribes to or unsubscribes from "*", with a few names
// in the same request at times.
func (m *fleetModel) toggleWildcard(fc *fleetClient, names int) {
	var sub, unsub []string
	if fc.wild {
		unsub = []string{"*"}
	} else {
		sub = []string{"*"}
	}
	if m.rng.IntN(2) == 0 {
		for _, name := range m.pick(m.rng.IntN(10)+1, names) {
			switch {
			case fc.named[name] && fc.started:
				unsub = append(unsub, name)
			case !fc.named[name]:
				sub = append(sub, name)
			}
		}
	}
	m.send(fc, EndpointType, sub, unsub, nil, nil)
}

// subscribeChunks subscribes to every name of one to three chunks, so that
// later reconnects name whole chunks.
func (m *fleetModel) subscribeChunks(fc *fleetClient, names int) {
	var sub []string
	for range m.rng.IntN(3) + 1 {
		k := m.rng.IntN((names + chunkLen - 1) / chunkLen)
		for i := k * chunkLen; i < min(names, (k+1)*chunkLen); i++ {
			if name := svcName(i); !fc.named[name] && !slices.Contains(sub, name) {
				sub = append(sub, name)
			}
		}
	}
	if len(sub) > 0 {
		m.send(fc, EndpointType, sub, nil, nil, nil)
	}
}

// predict is the refusal a request of fc must get: the names subscribed by
// name after it over NamesPerSubscription, or the names without a
// resource pinned over UnknownNames (those subscribed by name before it,
// unanswered unsubscriptions under the wildcard and the new ones: a
// request's unsubscriptions unpin at the next request). may is true when
// the request may be refused for UnknownNames though it need not: names
// pinned before they got a resource may still count.
func (m *fleetModel) predict(fc *fleetClient, sub, unsub []string) (must string, may bool) {
	lim := m.s.opts.Limits
	unknown, after, upper := 0, len(fc.named), 0
	for name := range fc.named {
		if fc.pinned[name] || !fc.started && !m.has(name) { // a new stream's first request names them again
			unknown++
		}
	}
	for name := range fc.pendRm {
		if fc.pinned[name] && !fc.named[name] {
			unknown++
		}
	}
	wild := (fc.wild || slices.Contains(sub, "*")) && !slices.Contains(unsub, "*")
	for _, name := range unsub {
		if fc.named[name] {
			after--
			if _, pinned := fc.pinned[name]; wild && !pinned && !m.has(name) {
				unknown++ // pinned until its removal is sent
			}
		}
	}
	seen := make(map[string]bool, len(sub))
	for _, name := range sub {
		if name == "*" || seen[name] || fc.named[name] {
			continue
		}
		seen[name] = true
		after++
		// Pinned now, unless it still is: a name counted above, or that
		// may be (upper). A pin the model keeps of a name neither named
		// nor owed a removal goes at this request's sweep.
		if definite, pinned := fc.pinned[name]; !m.has(name) && (!pinned || definite && !fc.pendRm[name]) {
			unknown++
		}
	}
	for _, definite := range fc.pinned {
		if !definite {
			upper++
		}
	}
	switch {
	case unknown > lim.UnknownNames:
		return reasonUnknownNames, true
	case after > lim.NamesPerSubscription:
		return reasonNamesPerSub, false
	}
	return "", unknown+upper > lim.UnknownNames
}

// send sends a delta request of fc and updates the model. A request the
// model says breaches a limit must be refused for it: the client then
// starts again on a fresh stream. notAsked are names subscribed that the
// request claims at their current version. It reports whether the request
// was refused.
func (m *fleetModel) send(fc *fleetClient, typ string, sub, unsub []string, initial map[string]string, notAsked map[string]string) bool {
	m.t.Helper()
	if typ == EndpointType && !fc.started && len(unsub) > 0 {
		m.t.Fatal("the model unsubscribes on a stream's first EDS request")
	}
	want, may := "", false
	if typ == EndpointType {
		want, may = m.predict(fc, sub, unsub)
	}
	now := map[string]asked{} // the subscribed names as they stand before the request
	if typ == EndpointType {
		m.s.mu.Lock()
		for _, name := range sub {
			if sl := m.s.types[typ].slots[name]; sl != nil && sl.cur != nil {
				now[name] = asked{known: true, visible: seenBy(sl.cur, fc.grpc) != nil, first: !fc.started}
			}
		}
		m.s.mu.Unlock()
	}
	fc.c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: fc.node(), TypeUrl: typ,
		ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub, InitialResourceVersions: initial}, nil)
	got := ""
	if r := fc.c.refused.Load(); r != nil {
		got = r.reason
	}
	if got != want && may && got == reasonUnknownNames {
		m.st.mayRefused++
		want = got
	}
	if got != want {
		m.t.Fatalf("EDS request (first %v, wildcard %v, %d named, sub %d, unsub %d): refused for %q, want %q; pinned and not in the model: %v",
			!fc.started, fc.wild, len(fc.named), len(sub), len(unsub), got, want, m.unmodelledPins(fc, sub))
	}
	fc.claimed = nil
	if got != "" {
		m.st.refused[got]++
		if !fc.started && wire.IsShared(sub) {
			m.st.sharedFirstRefused++
		}
		m.fresh(fc)
		return true
	}
	if typ != EndpointType {
		return false
	}
	fc.started = true
	if slices.Contains(sub, "*") && !fc.wild {
		fc.wild = true
		m.st.wildOn++
	}
	if slices.Contains(unsub, "*") && fc.wild {
		fc.wild = false
		m.st.wildOff++
		clear(fc.pendRm) // the server forgets them, unsent
	}
	for _, name := range unsub {
		if name == "*" || !fc.named[name] {
			continue
		}
		if !fc.wild {
			delete(fc.pinned, name) // nothing of it left: unpinned at the next request
		}
		delete(fc.named, name)
		delete(fc.asked, name)
		delete(fc.view[EndpointType], name) // a client forgets what it unsubscribes from
		if fc.wild {
			m.st.unsubUnderWild++
			if !m.has(name) {
				fc.pendRm[name] = true
				if _, ok := fc.pinned[name]; !ok {
					fc.pinned[name] = true
				}
			}
		}
	}
	for _, name := range sub {
		if name == "*" {
			continue
		}
		fc.named[name] = true
		if _, ok := fc.pinned[name]; !ok && !m.has(name) {
			fc.pinned[name] = true
		}
		if _, ok := notAsked[name]; ok {
			delete(fc.asked, name) // held at the current version: answered
		} else {
			fc.asked[name] = now[name]
		}
	}
	if !fc.wild {
		for name := range fc.view[EndpointType] {
			if !fc.named[name] {
				delete(fc.view[EndpointType], name) // held through the wildcard alone
			}
		}
	}
	return false
}

// unmodelledPins are the names the server pins for fc's EDS watch that
// the model does not count as unknown, for a refusal it did not predict.
func (m *fleetModel) unmodelledPins(fc *fleetClient, sub []string) []string {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	var out []string
	if w := fc.c.watches[EndpointType]; w != nil {
		for sl := range w.pins {
			if _, ok := fc.pinned[sl.name]; !ok && !fc.named[sl.name] && !fc.pendRm[sl.name] && !slices.Contains(sub, sl.name) {
				out = append(out, sl.name)
			}
		}
	}
	return byNum(out)
}

// fresh replaces fc's stream by a new one that holds and subscribes to
// nothing but "*" of CDS.
func (m *fleetModel) fresh(fc *fleetClient) {
	if fc.c != nil {
		m.s.disconnect(fc.c)
	}
	fc.c = m.connect()
	fc.view = map[string]map[string]string{ClusterType: {}, EndpointType: {}}
	fc.named, fc.asked, fc.pendRm, fc.pinned = map[string]bool{}, map[string]asked{}, map[string]bool{}, map[string]bool{}
	fc.wild, fc.started, fc.claimed = false, false, nil
	m.send(fc, ClusterType, []string{"*"}, nil, nil, nil)
}

func (m *fleetModel) connect() *client {
	c, r := m.s.connect(context.Background(), "delta_ads", true)
	if r != nil {
		m.t.Fatal(r)
	}
	return c
}

// mix hashes s with salt: per-name choices that take nothing of the test's
// random sequence, whatever the client holds.
func mix(salt uint64, s string) uint64 {
	h := salt ^ 0xcbf29ce484222325
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 0x100000001b3
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	return h ^ h>>33
}

// byNum sorts svc-N names by N: mostly slot order.
func byNum(names []string) []string {
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(len(a), len(b))*2 + cmp.Compare(a, b) })
	return names
}

// reconnect replaces fc's stream by a new one that subscribes to what the
// old one did and claims what fc holds, chunk by chunk all of it, none of
// it or some (some claims at a version the server never had). The old
// stream ends before the new one starts, or after its requests, as when
// the server learns of a lost connection late.
func (m *fleetModel) reconnect(fc *fleetClient) {
	old := fc.c
	late := m.rng.IntN(2) == 0
	if !late {
		m.s.disconnect(old)
	}
	fc.c = m.connect()
	fc.started, fc.claimed = false, nil
	clear(fc.pendRm)
	clear(fc.pinned)
	salt := m.rng.Uint64()
	sub := byNum(slices.Collect(maps.Keys(fc.named)))
	if fc.wild {
		sub = append([]string{"*"}, sub...)
	}
	shared := len(sub) > 1 && m.rng.IntN(3) > 0
	initial := map[string]map[string]string{}
	correct := map[string]map[string]string{}
	withClaims := map[string]map[int]bool{} // type → chunks holding a claim
	m.s.mu.Lock()
	for _, typ := range []string{ClusterType, EndpointType} {
		initial[typ], correct[typ], withClaims[typ] = map[string]string{}, map[string]string{}, map[int]bool{}
		ts := m.s.types[typ]
		for name, v := range fc.view[typ] {
			sl := ts.slots[name]
			k := -1
			if sl != nil {
				k = sl.idx >> chunkBits
			}
			switch mix(salt, typ+itoa(k+1)) % 3 {
			case 1: // nothing of this chunk claimed: the client lost it
				delete(fc.view[typ], name)
				continue
			case 2:
				if mix(salt, name)%2 == 0 {
					delete(fc.view[typ], name)
					continue
				}
			}
			if mix(salt^1, name)%10 == 0 {
				v = "forgotten" // a version the server never had: sent again
			}
			initial[typ][name] = v
			if sl != nil {
				withClaims[typ][k] = true
				if e := seenBy(sl.cur, fc.grpc); e != nil && e.version == v {
					correct[typ][name] = v
				}
			}
		}
	}
	// Whole chunks the subscription names, which a claim there must keep
	// claimChunks (or the wildcard's subscribeChunk) from taking.
	whole := map[string]map[int]bool{ClusterType: {}, EndpointType: {}}
	for _, typ := range []string{ClusterType, EndpointType} {
		tab := m.s.types[typ].table.Load()
		if tab == nil {
			continue
		}
		for k, tc := range *tab {
			if tc != nil && tc.plain && (typ == ClusterType || fc.wild) {
				whole[typ][k] = true
			}
		}
	}
	if ts := m.s.types[EndpointType]; !fc.wild && shared && len(sub) >= chunkLen && 4*len(sub) >= ts.total() &&
		len(initial[EndpointType])+len(sub) <= m.s.opts.Limits.NamesPerSubscription { // firstDelta calls claimChunks
		for i := 0; i < len(sub); {
			sl := ts.slots[sub[i]]
			if sl == nil {
				break // lookup answers nil: no chunk is claimed
			}
			k := sl.idx >> chunkBits
			var seen uint64
			ok := true
			j := i
			for ; j < len(sub); j++ {
				sj := ts.slots[sub[j]]
				if sj == nil || sj.idx>>chunkBits != k {
					break
				}
				b := uint64(1) << (sj.idx & (chunkLen - 1))
				ok = ok && seen&b == 0 && sj.cur != nil
				seen |= b
			}
			if tc := ts.chunk(k); ok && tc != nil && tc.mask == seen {
				if tc.plain {
					whole[EndpointType][k] = true
				} else if !withClaims[EndpointType][k] && !fc.grpc && slices.ContainsFunc(tc.e[:], func(e *entry) bool { return e != nil && e.grpcOnly }) {
					// claimChunks must decline it for plain alone, or the
					// Envoy is never told the gRPC-only names are absent.
					m.st.nonPlainClaimable++
				}
			}
			i = j
		}
	}
	m.s.mu.Unlock()

	m.send(fc, ClusterType, []string{"*"}, nil, initial[ClusterType], nil)
	refused := false
	if len(sub) > 0 {
		if shared {
			sub = share(m.t, sub)
		}
		refused = m.send(fc, EndpointType, sub, nil, initial[EndpointType], correct[EndpointType])
	}
	if late {
		m.s.disconnect(old)
	}
	if refused {
		return
	}
	m.s.mu.Lock()
	fc.c.mu.Lock()
	for _, typ := range []string{ClusterType, EndpointType} {
		w := fc.c.watches[typ]
		if w == nil {
			continue
		}
		present := 0
		for range w.sent.all() {
			present++
		}
		if present != w.sent.len() {
			m.t.Errorf("%s after a reconnect: sent set counts %d, holds %d", typ, w.sent.len(), present)
		}
		for k, hc := range w.sent.dense {
			tc := w.t.chunk(k)
			if tc == nil || hc != tc.none {
				switch {
				case !withClaims[typ][k] || !whole[typ][k]:
				case typ == EndpointType && !fc.wild:
					m.st.claimSkipped++
				default:
					m.st.wildSkipped++
				}
				continue
			}
			if withClaims[typ][k] {
				m.t.Errorf("%s chunk %d: taken whole by a reconnect that claims names in it", typ, k)
			}
			if typ == EndpointType && !fc.wild {
				m.st.claimTaken++
			}
		}
	}
	fc.c.mu.Unlock()
	m.s.mu.Unlock()
	fc.claimed = correct
}

// drain takes up to k responses of fc (k < 0: all it is owed).
func (m *fleetModel) drain(fc *fleetClient, k int) {
	for ; k != 0; k-- {
		o := owed(fc.c)
		if o == nil {
			return
		}
		m.responses++
		var list []*entry
		var removed []string
		if m.responses%4 == 0 { // decoding each costs a third of the test
			list, removed, _ = wireOf(m.t, o.msg)
		} else {
			d := o.msg.(*deltaMsg)
			list, removed = d.list, d.removed
		}
		typ := o.t.url
		v := fc.view[typ]
		seen := make(map[string]bool, len(list))
		for _, e := range list {
			if seen[e.name] {
				m.t.Fatalf("a response carries %s twice", e.name)
			}
			seen[e.name] = true
			if c, ok := fc.claimed[typ][e.name]; ok && c == e.version {
				m.t.Errorf("%s %s: sent again at the version the reconnect claimed", typ, e.name)
			}
			v[e.name] = e.version
			if typ == EndpointType {
				delete(fc.asked, e.name)
			}
		}
		for _, name := range removed {
			delete(v, name)
			if typ == EndpointType {
				if a, ok := fc.asked[name]; ok && a.known {
					m.st.hiddenAnswered++
				}
				delete(fc.asked, name)
				delete(fc.pendRm, name)
			}
		}
	}
}

func (m *fleetModel) drainAll() {
	for _, fc := range m.clients {
		m.drain(fc, -1)
	}
}

// check compares each client's view and the server's sent sets with what
// the client's class sees of the current entries: every cluster, and the
// assignments subscribed to by name or through the wildcard.
func (m *fleetModel) check() {
	m.st.checks++
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	for ci, fc := range m.clients {
		fc.c.mu.Lock()
		m.checkClient(fmt.Sprintf("client %d (grpc %v)", ci, fc.grpc), fc)
		fc.c.mu.Unlock()
	}
	m.checkSlots()
}

// checkSlots checks the store's slots against the watches that reference
// them: every slot a watch references is the live slot of its name, every
// slot's owed count is the watches owing its removal, and a slot without
// an entry is referenced (else it should have been released). Server.mu
// held.
func (m *fleetModel) checkSlots() {
	t := m.t
	for _, typ := range []string{ClusterType, EndpointType} {
		ts := m.s.types[typ]
		owed := map[*slot]int32{}
		for c := range m.s.clients {
			c.mu.Lock()
			w := c.watches[typ]
			if w == nil {
				c.mu.Unlock()
				continue
			}
			var refs []*slot
			for sl := range w.sent.all() {
				refs = append(refs, sl)
			}
			for sl, p := range w.dirty {
				refs = append(refs, sl)
				if p.e == nil {
					owed[sl]++
				}
			}
			for sl := range w.waiting {
				refs = append(refs, sl)
			}
			for sl := range w.pins {
				refs = append(refs, sl)
			}
			c.mu.Unlock()
			for _, sl := range refs {
				if sl == nil || ts.slots[sl.name] != sl || ts.byIdx.at(sl.idx) != sl {
					t.Fatalf("%s: a watch references a released slot", typ)
				}
			}
		}
		for name, sl := range ts.slots {
			if got := sl.owed.Load(); got != owed[sl] {
				t.Errorf("%s %s: owed %d, %d watches owe its removal", typ, name, got, owed[sl])
			}
			if sl.cur == nil && sl.pins == 0 && sl.subs.len() == 0 && owed[sl] == 0 {
				t.Errorf("%s %s: a slot nothing references was kept", typ, name)
			}
		}
	}
}

func (m *fleetModel) checkClient(who string, fc *fleetClient) {
	t := m.t
	for _, typ := range []string{ClusterType, EndpointType} {
		ts := m.s.types[typ]
		wild := typ == ClusterType || fc.wild
		subscribed := func(name string) bool { return wild || typ == EndpointType && fc.named[name] }
		want := map[string]string{}
		for _, sl := range ts.byIdx.all() {
			if sl == nil || sl.cur == nil || !subscribed(sl.name) {
				continue
			}
			e := seenBy(sl.cur, fc.grpc)
			if v := fc.c.visible(sl.cur); v != e {
				t.Errorf("%s: %s %s: visible gives %v, the rule %v", who, typ, sl.name, v, e)
			}
			if e == nil {
				m.st.hiddenHeld++
				continue
			}
			if e != sl.cur {
				m.st.variantHeld++
			}
			want[sl.name] = e.version
		}
		if typ == EndpointType {
			for _, tc := range *ts.table.Load() {
				if tc == nil || tc.plain {
					continue
				}
				all := true
				for _, e := range tc.e {
					all = all && (e == nil || subscribed(e.name))
				}
				if all {
					m.st.nonPlainWhole++
				}
			}
		}
		got := fc.view[typ]
		for name, v := range want {
			if got[name] != v {
				t.Errorf("%s: %s %s: client holds %q, current %q", who, typ, name, got[name], v)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: %s %s: client holds %q, not current, not subscribed or hidden", who, typ, name, got[name])
			}
		}
		w := fc.c.watches[typ]
		if w == nil {
			if len(want) > 0 {
				t.Errorf("%s: %s: no watch", who, typ)
			}
			continue
		}
		if typ == EndpointType && w.wildcard != fc.wild {
			t.Errorf("%s: EDS wildcard %v, want %v", who, w.wildcard, fc.wild)
		}
		if typ == EndpointType && w.wildcard {
			for sl := range w.named {
				if !fc.named[sl.name] {
					t.Errorf("%s: EDS %s: named by the server, not by the client", who, sl.name)
				}
			}
			if len(w.named) != len(fc.named) {
				t.Errorf("%s: EDS: the server has %d names subscribed by name, the client %d", who, len(w.named), len(fc.named))
			}
		}
		present := 0
		for sl, e := range w.sent.all() {
			present++
			if e != nil && got[sl.name] != e.version {
				t.Errorf("%s: %s %s: server thinks the client holds %q, it holds %q", who, typ, sl.name, e.version, got[sl.name])
			}
			// Under a wildcard, a slot present without an entry may
			// outlive its resource (removals drop nothing the client was
			// not sent): harmless, the client holds nothing of it.
			if !(typ == EndpointType && fc.named[sl.name]) && !(wild && (sl.cur != nil || e == nil)) {
				t.Errorf("%s: %s %s: in the sent set, not subscribed", who, typ, sl.name)
			}
		}
		if present != w.sent.len() {
			t.Errorf("%s: %s: sent set counts %d, holds %d", who, typ, w.sent.len(), present)
		}
		for name, v := range got {
			sl := ts.slots[name]
			if sl == nil {
				t.Errorf("%s: %s %s: held by the client, no slot", who, typ, name)
				continue
			}
			if h, _ := w.sent.get(sl); h == nil || h.version != v {
				t.Errorf("%s: %s %s: client holds %q, server thinks %v", who, typ, name, v, h)
			}
		}
		if typ != EndpointType {
			continue
		}
		for name := range fc.named {
			if sl := ts.slots[name]; sl == nil || !w.sent.has(sl) {
				t.Errorf("%s: EDS %s: subscribed, not in the sent set", who, name)
			}
		}
		// Every subscription is answered: at once when the name has a
		// resource (hidden: as removed), else after the bounded wait. A first
		// request's name that was visible and is gone before the answer is
		// answered by its removal, which this view does not track.
		for name, a := range fc.asked {
			sl := ts.slots[name]
			if sl == nil {
				t.Errorf("%s: EDS %s: subscribed, no slot", who, name)
				continue
			}
			_, waits := w.waiting[sl]
			if !waits && a.first && a.visible && seenBy(sl.cur, fc.grpc) == nil {
				m.st.firstUnanswered++ // answered by its removal: TestFirstRequestRemovedBeforeAnswerIsAnswered
				continue
			}
			if !waits || sl.cur != nil && seenBy(sl.cur, fc.grpc) != nil {
				h, held := w.sent.get(sl)
				t.Errorf("%s: EDS %s: subscribed (%+v), never answered (current %v, waiting %v, held %v %v)", who, name, a, sl.cur != nil, waits, held, h)
			}
		}
	}
}

// TestFirstRequestRemovedBeforeAnswerIsAnswered: a name that a stream's
// first delta request subscribes to, whose resource is removed before the
// response is built, is answered by the removal (doc.go: every
// subscription is answered). TestSubscriptionRemovedBeforeAnswerIsAnswered
// covers later requests, which force their answer; the first request's
// bulk path queues its entries unforced.
func TestFirstRequestRemovedBeforeAnswerIsAnswered(t *testing.T) {
	s := NewServer(Options{})
	s.Apply(services(10), nil)
	c, _ := s.connect(context.Background(), "delta_ads", true)
	defer s.disconnect(c)
	x := svcName(2)
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: []string{svcName(1), x}}, nil)
	s.Apply(nil, []Key{{EndpointType, x}})
	if sent, removed := drainFor(t, c, x); !sent && !removed {
		t.Fatalf("the first request's subscription to %s was never answered", x)
	}
}
