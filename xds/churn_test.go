package xds

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
	"weak"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// The store's memory is bounded by what it serves and what its clients are
// still owed, never by the names it ever served: these tests churn names
// through a server with clients of every kind and count the slots left.

// churnNames are the names of round r's services: new ones each round, and
// a few that come back every round, so that a name whose slot was released
// gets a new one (and, likely, another's index).
func churnNames(r, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("round%d-%d", r, i))
	}
	for i := range 3 {
		out = append(out, fmt.Sprintf("again-%d", i))
	}
	return out
}

func churnResources(names []string) []Resource {
	var rs []Resource
	for i, name := range names {
		rs = append(rs, cluster(name, 1e9), assignment(name, uint32(20000+i)))
	}
	return rs
}

func churnKeys(names []string) []Key {
	var ks []Key
	for _, name := range names {
		ks = append(ks, Key{ClusterType, name}, Key{EndpointType, name})
	}
	return ks
}

// deltaHolder is what a delta client holds of one type, by name.
type deltaHolder map[string]string

// until receives on c, ACKing each response and applying those of typ to
// h, until h holds exactly want.
func (h deltaHolder) until(t *testing.T, c *delta, typ string, want []string) {
	t.Helper()
	for !slices.Equal(slices.Sorted(maps.Keys(h)), want) {
		r := c.recv()
		c.send(deltaAck(r))
		if r.TypeUrl != typ {
			continue
		}
		for _, x := range r.Resources {
			h[x.Name] = x.Version
		}
		for _, name := range r.RemovedResources {
			delete(h, name)
		}
	}
}

// sotwUntil receives on c, ACKing each response with names, until a
// response of typ lists exactly want.
func sotwUntil(t *testing.T, c *sotw, typ string, want []string, names ...string) {
	t.Helper()
	for {
		r := c.recv()
		c.send(ack(r, names...))
		if r.TypeUrl == typ && slices.Equal(namesOf(t, r), want) {
			return
		}
	}
}

func namesOf(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	got := names(t, r)
	if got == nil {
		got = []string{}
	}
	return got
}

// TestRemovedNamesAreReleased: ten rounds of new names, each back to the
// same six services, with an Envoy on delta ADS (wildcard CDS and EDS), a
// SotW ADS wildcard client and a SotW EDS client naming the six. Once the
// clients hold the removals the store is back to the six slots of each
// type: it does not grow with the names it served.
func TestRemovedNamesAreReleased(t *testing.T) {
	s, cc := served(t, Options{}, 6)
	base := make([]string, 6)
	for i := range base {
		base[i] = svcName(i)
	}
	slices.Sort(base)

	d := openDeltaADS(t, cc)
	d.send(deltaReq(ClusterType, "*"))
	d.send(deltaReq(EndpointType, "*"))
	dc, de := deltaHolder{}, deltaHolder{}
	dc.until(t, d, ClusterType, base)
	de.until(t, d, EndpointType, base)

	w := openADS(t, cc)
	w.send(req(ClusterType))
	sotwUntil(t, w, ClusterType, base)

	e := openEDS(t, cc)
	e.send(req(EndpointType, base...))
	sotwUntil(t, e, EndpointType, base, base...)

	for r := range 10 {
		names := churnNames(r, 200)
		all := slices.Sorted(slices.Values(append(slices.Clone(base), names...)))
		s.Apply(churnResources(names), nil)
		dc.until(t, d, ClusterType, all)
		de.until(t, d, EndpointType, all)
		sotwUntil(t, w, ClusterType, all)

		s.Apply(nil, churnKeys(names))
		dc.until(t, d, ClusterType, base)
		de.until(t, d, EndpointType, base)
		sotwUntil(t, w, ClusterType, base)
		waitFor(t, func() bool { return live(s, ClusterType) == 6 && live(s, EndpointType) == 6 })
		if got := s.Resources(); got != 12 {
			t.Fatalf("Resources() = %d, want the 12 served", got)
		}
	}
	// The SotW EDS client, subscribed to the six only, was sent none of it.
	e.none(0)
}

// TestStalledClientHoldsOnlyWhatItIsOwed: a client that stops reading
// (in process, its writer never runs) keeps the slots of the removals it
// is owed, of what it holds, and no more however many names come and go
// meanwhile; once it takes what it is owed, or goes, the store is back to
// what it serves.
func TestStalledClientHoldsOnlyWhatItIsOwed(t *testing.T) {
	for _, gone := range []string{"drained", "disconnected"} {
		t.Run(gone, func(t *testing.T) {
			s := NewServer(Options{})
			s.Apply(services(6), nil)
			c, _ := s.connect(t.Context(), "test", true)
			c.onDelta("", deltaReq(ClusterType, "*"), nil)
			for owed(c) != nil {
			}
			names := churnNames(0, 100)
			s.Apply(churnResources(names), nil)
			for owed(c) != nil {
			}
			// Held by the client, then removed while it does not read: the
			// removals are owed. It has no EDS watch: those go at once.
			s.Apply(nil, churnKeys(names))
			if cl, ep := live(s, ClusterType), live(s, EndpointType); cl != 6+len(names) || ep != 6 {
				t.Fatalf("%d cluster and %d endpoint slots, want %d and 6", cl, ep, 6+len(names))
			}
			// Names it was never sent cost nothing once they are gone.
			for r := 1; r < 5; r++ {
				more := churnNames(r, 100)[:100]
				s.Apply(churnResources(more), nil)
				s.Apply(nil, churnKeys(more))
			}
			if cl := live(s, ClusterType); cl != 6+len(names) {
				t.Fatalf("%d cluster slots after more churn, want %d", cl, 6+len(names))
			}
			if gone == "drained" {
				for owed(c) != nil {
				}
			} else {
				s.disconnect(c)
			}
			if cl, ep := live(s, ClusterType), live(s, EndpointType); cl != 6 || ep != 6 {
				t.Fatalf("%d cluster and %d endpoint slots, want the 6 served", cl, ep)
			}
		})
	}
}

// TestReconnectClaimingForgottenNames: a delta client that held names the
// store has since removed and forgotten (their slots released) reconnects
// claiming them: each is answered with its removal, as a name the server
// never had; claims are not subscriptions, so more of them than
// Limits.UnknownNames are answered, not refused; and the store forgets
// them again once the removals are sent.
func TestReconnectClaimingForgottenNames(t *testing.T) {
	s, cc := served(t, Options{Limits: Limits{UnknownNames: 5}}, 6)
	names := churnNames(0, 50)
	s.Apply(churnResources(names), nil)
	claims := map[string]string{}
	for _, name := range names {
		claims[name] = endpointVersions(s)[name]
	}
	s.Apply(nil, churnKeys(names))
	waitFor(t, func() bool { return live(s, ClusterType) == 6 && live(s, EndpointType) == 6 })

	d := openDeltaADS(t, cc)
	d.send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType,
		ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: claims})
	removed := map[string]bool{}
	for len(removed) < len(names) {
		r := d.recv()
		d.send(deltaAck(r))
		for _, name := range r.RemovedResources {
			removed[name] = true
		}
	}
	if got := slices.Sorted(maps.Keys(removed)); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Fatalf("removed %v, want every claimed name", got)
	}
	waitFor(t, func() bool { return live(s, EndpointType) == 6 })
	if len(s.Clients()) != 1 {
		t.Fatal("the client was refused")
	}
}

// TestReleasedSlotsAreCollected: nothing keeps a released slot reachable
// (a frame, a lookup, a queue), so its memory goes with it.
func TestReleasedSlotsAreCollected(t *testing.T) {
	s, cc := served(t, Options{}, 6)
	d := openDeltaADS(t, cc)
	d.send(deltaReq(ClusterType, "*"))
	d.send(deltaReq(EndpointType, "*"))
	dc, de := deltaHolder{}, deltaHolder{}
	base := []string{"svc-0", "svc-1", "svc-2", "svc-3", "svc-4", "svc-5"}
	dc.until(t, d, ClusterType, base)
	de.until(t, d, EndpointType, base)
	names := churnNames(0, 500)
	s.Apply(churnResources(names), nil)
	all := slices.Sorted(slices.Values(append(slices.Clone(base), names...)))
	dc.until(t, d, ClusterType, all)
	de.until(t, d, EndpointType, all)
	var gone []weak.Pointer[slot]
	s.mu.Lock()
	for _, name := range names {
		gone = append(gone, weak.Make(s.types[ClusterType].slots[name]), weak.Make(s.types[EndpointType].slots[name]))
	}
	s.mu.Unlock()
	s.Apply(nil, churnKeys(names))
	dc.until(t, d, ClusterType, base)
	de.until(t, d, EndpointType, base)
	waitFor(t, func() bool { return live(s, ClusterType) == 6 && live(s, EndpointType) == 6 })
	runtime.GC()
	kept := 0
	for _, p := range gone {
		if p.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Fatalf("%d of %d released slots are still reachable", kept, len(gone))
	}
}
