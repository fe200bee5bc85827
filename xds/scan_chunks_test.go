package xds

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// share marks names as a list the codec hands out to several requests, as
// Codec does with the identical lists of a fleet.
func share(t *testing.T, names []string) []string {
	if len(names) > 0 {
		shared.Store(&names[0], struct{}{})
		t.Cleanup(func() { shared.Delete(&names[0]) })
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
		s.onDelta(c, "", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: sub})
		w := c.watches[typ]
		if w.scan == nil {
			t.Fatal("no scan queued")
		}
		return s, c, w, w.scan
	}
	t.Run("a wildcard holds the shared twins, and lacks every chunk", func(t *testing.T) {
		_, _, w, f := setup(t, []string{"*"})
		for k := range f.tab {
			if w.held.dense[k] != f.tab[k].none {
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
			if w.held.dense[k] != f.tab[k].none {
				t.Errorf("chunk %d: not the type's twin", k)
			}
		}
		if w.held.len() != n {
			t.Errorf("held set counts %d, want %d", w.held.len(), n)
		}
	})
	t.Run("a shared list naming one twice counts it once", func(t *testing.T) {
		names := manyNames(n)
		names = append(names[:6:6], names[5:]...) // svc-5 twice, in slot order
		_, _, w, _ := setup(t, share(t, names))
		if w.held.len() != n {
			t.Errorf("held set counts %d, want %d", w.held.len(), n)
		}
	})
	t.Run("a shared list over the names-per-subscription limit is still refused", func(t *testing.T) {
		s := NewServer(Options{Limits: Limits{NamesPerSubscription: n - 1}})
		s.Apply(services(n), nil)
		c, _ := s.connect(context.Background(), "delta_ads", true)
		defer s.disconnect(c)
		if r := s.delta(c, "", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: share(t, manyNames(n))}, initialVersions{}); r == nil || r.reason != reasonNamesPerSub {
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
		c.src = &Variant{}
		defer func() { c.src = nil }()
		if got := w.fit(f, 1); got != perName {
			t.Errorf("%v, want perName", got)
		}
	})
	t.Run("once sent, the watch holds every chunk", func(t *testing.T) {
		_, c, w, f := setup(t, manyNames(n))
		for owed(c) != nil {
		}
		for k := range f.tab {
			if got := w.fit(f, k); got != heldAll {
				t.Errorf("chunk %d: %v, want heldAll", k, got)
			}
		}
	})
}

// TestScanMatchesModel drives delta clients through random subscriptions,
// changes, removals, reconnects and partial drains, with and without a
// response size limit, and checks after full drains that every
// client holds exactly the current entries of what it subscribes to and
// that the server's held set agrees. Whole-chunk scans and name-by-name
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
	m.s.onDelta(m.c, "", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub})
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
			m.s.onDelta(c, "", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: initial})
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
			m.s.onDelta(c, "", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: sub, InitialResourceVersions: initial})
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

// check compares the client's view and the server's held set with the
// current entries: every cluster, and the assignments subscribed to.
func (m *scanModel) check(subscribed map[string]bool) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	for _, typ := range []string{ClusterType, EndpointType} {
		want := map[string]string{}
		ts := m.s.types[typ]
		for _, sl := range ts.byIdx {
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
		for sl, e := range w.held.all() {
			present++
			if e != nil && got[sl.name] != e.version {
				m.t.Errorf("%s %s: server thinks the client holds %q, it holds %q", typ, sl.name, e.version, got[sl.name])
			}
			if typ == EndpointType && !subscribed[sl.name] {
				m.t.Errorf("%s %s: in the held set, not subscribed", typ, sl.name)
			}
		}
		if present != w.held.len() {
			m.t.Errorf("%s: held set counts %d, holds %d", typ, w.held.len(), present)
		}
		if typ == EndpointType {
			for name := range subscribed {
				if sl := ts.slots[name]; sl == nil || !w.held.has(sl) {
					m.t.Errorf("%s %s: subscribed, not in the held set", typ, name)
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
				s.onDelta(c, "", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: first})
				var old string
				s.mu.Lock()
				old = s.types[EndpointType].slots[late].cur.version
				s.mu.Unlock()
				if removed {
					s.Apply(nil, []Key{{EndpointType, late}})
				} else {
					s.Apply([]Resource{assignment(late, 1, 2, 3)}, nil)
				}
				s.onDelta(c, "", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesSubscribe: []string{late}})
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
