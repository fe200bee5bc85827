package manager

import (
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

func TestSanitizerCountsOncePerChange(t *testing.T) {
	st := sources.NewStatus("s")
	var s sanitizer
	s.status = st
	bad := func() sources.Update {
		return fullUp(testSvc("web", "10.0.0.1", "0.0.0.0", "fe80::1%eth0", "ff02::1"), testSvc("api", "::", "10.0.0.2"))
	}
	for read := range 3 {
		u := bad()
		s.clean(&u)
		if got := len(u.Services[0].Endpoints) + len(u.Services[1].Endpoints); got != 2 {
			t.Fatalf("read %d: %d endpoints kept, want 2", read, got)
		}
		if got := st.Snapshot().Dropped; got != 4 {
			t.Fatalf("read %d: dropped_endpoints = %d, want 4 (each bad endpoint once)", read, got)
		}
	}
	// A change of the service that brings a new bad endpoint counts it.
	u := upsertUp(testSvc("web", "10.0.0.1", "0.0.0.0", "224.0.0.9"))
	s.clean(&u)
	if got := st.Snapshot().Dropped; got != 5 {
		t.Errorf("dropped_endpoints = %d after a new bad endpoint, want 5", got)
	}
	// Gone and back: counted again.
	s.clean(&sources.Update{Removed: []string{"api"}})
	u = upsertUp(testSvc("api", "::"))
	s.clean(&u)
	if got := st.Snapshot().Dropped; got != 6 {
		t.Errorf("dropped_endpoints = %d, want 6", got)
	}
}

func TestSanitizerCapsEndpoints(t *testing.T) {
	svc := sources.Service{Name: "big"}
	for i := range MaxEndpointsPerService + 5 {
		svc.Endpoints = append(svc.Endpoints, sources.Endpoint{Address: "10.0.0.1", Port: uint32(MaxEndpointsPerService + 5 - i)})
	}
	orig := svc.Endpoints[0]
	s := sanitizer{status: sources.NewStatus("s")}
	u := fullUp(svc)
	if n := s.clean(&u); n != 5 || len(u.Services[0].Endpoints) != MaxEndpointsPerService {
		t.Fatalf("dropped %d, kept %d", n, len(u.Services[0].Endpoints))
	}
	if u.Services[0].Endpoints[0].Port != 1 || !svc.Endpoints[0].Equal(orig) {
		t.Error("not the first endpoints in canonical order kept, or the sender's slice modified")
	}
}
