package consul

import (
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
)

// TestResponseLimitAndDropCount checks two bounds on what the agent's
// answers can do: an instance that cannot be served counts once per change
// of its service, however often the service is read again, and an answer
// larger than max_response_bytes fails the read (stale, with the reason)
// and keeps the last state instead of being decoded.
func TestResponseLimitAndDropCount(t *testing.T) {
	f, addr := newFakeConsul(t)
	unservable := &api.ServiceEntry{Node: &api.Node{Node: "n1", Address: "10.0.0.1", ModifyIndex: 5},
		Service: &api.AgentService{ID: "svc-bad", Service: "svc", Port: 0}}
	f.set(func() { f.entries = append(svcEntries(1), unservable) })
	r := startSource(t, nil, map[string]any{"address": addr, "retry_min": "50ms", "retry_max": "200ms",
		"max_response_bytes": 4096})
	r.synced(patience)
	r.waitFor(patience, "svc with 1 endpoint", func() bool { return len(r.endpointsOf("svc")) == 1 })
	if got := r.status.Snapshot().Dropped; got != 1 {
		t.Fatalf("dropped = %d after the first read, want 1", got)
	}

	// Unrelated catalog changes make the source read svc again; the same
	// unservable instance must not be counted again.
	reads := f.count("/v1/health/service/svc")
	for range 3 {
		f.set(func() { f.index++ })
		r.waitFor(patience, "svc read again", func() bool { return f.count("/v1/health/service/svc") > reads })
		reads = f.count("/v1/health/service/svc")
	}
	if got := r.status.Snapshot().Dropped; got != 1 {
		t.Errorf("dropped = %d after re-reads of an unchanged service, want 1", got)
	}

	// An answer over the limit: the read fails, nothing is published.
	n := r.updateCount()
	ports := make([]int, 200)
	for i := range ports {
		ports[i] = 1000 + i
	}
	f.set(func() { f.index++; f.entries = svcEntries(ports...) })
	r.waitFor(patience, "stale over a too large answer", func() bool {
		s := r.status.Snapshot()
		return s.Stale && strings.Contains(s.LastError, "max_response_bytes")
	})
	if got := len(r.endpointsOf("svc")); got != 1 || r.updateCount() != n {
		t.Errorf("after a too large answer: %d endpoints, %d updates; want the last state kept", got, r.updateCount()-n)
	}
}
