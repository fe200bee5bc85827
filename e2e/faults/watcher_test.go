package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// view is what a client holds: the endpoints (address:port, sorted) of
// each cluster it has.
type view map[string][]string

func (v view) String() string {
	var b strings.Builder
	for _, c := range slices.Sorted(maps.Keys(v)) {
		fmt.Fprintf(&b, "%s=%v ", c, v[c])
	}
	return strings.TrimSpace(b.String())
}

// viewOf projects a client's state.
func viewOf(s envoysim.State) view {
	v := view{}
	for name := range s.Clusters {
		v[name] = addrs(s.Assignments[name])
	}
	return v
}

func addrs(cla *endpointv3.ClusterLoadAssignment) []string {
	out := []string{}
	for _, group := range cla.GetEndpoints() {
		for _, lb := range group.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
		}
	}
	slices.Sort(out)
	return out
}

// watcher is an xDS client (delta ADS, as Envoy's recent releases speak
// by default) that checks every response it receives: while it guards a
// view, a response that takes a guarded cluster or one of its endpoints
// away is a removal, recorded with what it left.
type watcher struct {
	t *testing.T
	c *envoysim.Client

	mu       sync.Mutex
	guarded  view
	removals []string
}

// startWatcher connects a watcher to the bridge's xDS listener.
func startWatcher(t *testing.T, addr string) *watcher {
	t.Helper()
	w := &watcher{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := envoysim.Start(ctx, envoysim.Options{Addr: addr, Node: "watcher", Delta: true, OnResponse: w.check})
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	t.Cleanup(c.Close)
	return w
}

// in makes t the test that w's checks fail, until the returned function
// is called (see bridge.in).
func (w *watcher) in(t *testing.T) (restore func()) {
	t.Helper()
	prev := w.t
	w.t = t
	return func() { w.t = prev }
}

// check runs after every response.
func (w *watcher) check(c *envoysim.Client, r envoysim.Received) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.guarded == nil {
		return
	}
	for _, name := range r.Removed {
		if _, ok := w.guarded[name]; ok {
			w.removals = append(w.removals, fmt.Sprintf("%s response %s removed %s", short(r.TypeURL), r.Version, name))
		}
	}
	held := viewOf(c.State())
	for name, want := range w.guarded {
		got, ok := held[name]
		if !ok {
			w.removals = append(w.removals, fmt.Sprintf("after %s response %s: cluster %s gone", short(r.TypeURL), r.Version, name))
			continue
		}
		for _, ep := range want {
			if !slices.Contains(got, ep) {
				w.removals = append(w.removals, fmt.Sprintf("after %s response %s: %s lost %s (holds %v)",
					short(r.TypeURL), r.Version, name, ep, got))
			}
		}
	}
}

func short(typeURL string) string { return typeURL[strings.LastIndexByte(typeURL, '.')+1:] }

// view returns what the watcher holds now.
func (w *watcher) view() view { return viewOf(w.c.State()) }

// wait waits until the watcher's view satisfies cond.
func (w *watcher) wait(what string, cond func(view) bool) view {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	var v view
	if err := w.c.WaitFor(ctx, func(s envoysim.State) bool { v = viewOf(s); return cond(v) }); err != nil {
		w.t.Fatalf("the watcher does not hold %s: %v; it holds %s", what, err, w.view())
	}
	return v
}

// waitHolds waits until the watcher holds exactly want.
func (w *watcher) waitHolds(what string, want view) {
	w.t.Helper()
	w.wait(what+": "+want.String(), func(v view) bool { return v.String() == want.String() })
}

// guard starts checking that no response removes what the watcher holds
// now (or a cluster of it: only those named, when names are given).
func (w *watcher) guard(names ...string) view {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.view()
	if len(names) > 0 {
		keep := view{}
		for _, n := range names {
			keep[n] = v[n]
		}
		v = keep
	}
	w.guarded, w.removals = v, nil
	return v
}

// release stops guarding and fails the test if a removal reached the
// watcher while it guarded.
func (w *watcher) release() {
	w.t.Helper()
	w.mu.Lock()
	removals := w.removals
	w.guarded, w.removals = nil, nil
	w.mu.Unlock()
	if len(removals) > 0 {
		w.t.Errorf("%d removals reached the watcher during the fault, the first: %s", len(removals), strings.Join(removals[:min(5, len(removals))], "; "))
	}
}
