package xds

import (
	"context"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// TestWildcardSkipsHiddenResources: an Envoy's wildcard subscription to
// listeners, beside the proxyless gRPC listener of every service (served
// to gRPC clients only), keeps state only for what it is sent: nothing
// held or waited for per hidden listener (at a thousand services that was
// a hundred kilobytes kept by every Envoy), and in delta no removal of
// names it never had.
func TestWildcardSkipsHiddenResources(t *testing.T) {
	const n = 200
	for _, delta := range []bool{false, true} {
		name := map[bool]string{false: "sotw", true: "delta"}[delta]
		t.Run(name, func(t *testing.T) {
			s := NewServer(Options{})
			var rs []Resource
			for i := range n {
				rs = append(rs, Resource{Type: ListenerType, Name: svcName(i), Message: &listenerv3.Listener{Name: svcName(i)}, GRPCOnly: true})
			}
			rs = append(rs, Resource{Type: ListenerType, Name: "edge", Message: &listenerv3.Listener{Name: "edge"}})
			s.Apply(rs, nil)
			c, err := envoysim.Start(context.Background(), envoysim.Options{Addr: listen(t, s), Node: "edge-1", Delta: delta,
				Types: []string{envoysim.ListenerType}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			if err := c.WaitFor(ctx, func(st envoysim.State) bool { _, ok := st.Resources[envoysim.ListenerType]["edge"]; return ok }); err != nil {
				t.Fatal(err)
			}
			if got := c.Len(envoysim.ListenerType); got != 1 {
				t.Errorf("the Envoy holds %d listeners, want 1 (edge)", got)
			}
			if st := c.Stats(); st.Removed != 0 {
				t.Errorf("the Envoy was sent %d removals of listeners it never had", st.Removed)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			for cl := range s.clients {
				cl.mu.Lock()
				w := cl.watches[ListenerType]
				held, waiting := w.sent.len(), len(w.waiting)
				cl.mu.Unlock()
				if held != 1 || waiting != 0 {
					t.Errorf("the watch holds %d names and waits for %d, want 1 and 0", held, waiting)
				}
			}
		})
	}
}
