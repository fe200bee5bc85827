package sources

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCheckUpstream(t *testing.T) {
	for _, tt := range []struct {
		addr string
		bad  string
	}{
		{"10.0.0.1", ""}, {"2001:db8::1", ""}, {"::1", ""}, {"127.0.0.1", ""}, {"fe80::1", ""},
		{"0.0.0.0", "unspecified"}, {"::", "unspecified"}, {"224.0.0.1", "multicast"}, {"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"}, {"fe80::1%eth0", "scoped"},
	} {
		err := CheckUpstream(netip.MustParseAddr(tt.addr))
		if (err == nil) != (tt.bad == "") || (err != nil && !strings.Contains(err.Error(), tt.bad)) {
			t.Errorf("CheckUpstream(%s) = %v, want %q", tt.addr, err, tt.bad)
		}
	}
}

func TestSanitizerCountsOncePerChange(t *testing.T) {
	st := NewStatus("s")
	var s sanitizer
	s.status = st
	bad := func() Update {
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
	s.clean(&Update{Removed: []string{"api"}})
	u = upsertUp(testSvc("api", "::"))
	s.clean(&u)
	if got := st.Snapshot().Dropped; got != 6 {
		t.Errorf("dropped_endpoints = %d, want 6", got)
	}
}

func TestSanitizerCapsEndpoints(t *testing.T) {
	svc := Service{Name: "big"}
	for i := range MaxEndpointsPerService + 5 {
		svc.Endpoints = append(svc.Endpoints, Endpoint{Address: "10.0.0.1", Port: uint32(MaxEndpointsPerService + 5 - i)})
	}
	orig := svc.Endpoints[0]
	s := sanitizer{status: NewStatus("s")}
	u := fullUp(svc)
	if n := s.clean(&u); n != 5 || len(u.Services[0].Endpoints) != MaxEndpointsPerService {
		t.Fatalf("dropped %d, kept %d", n, len(u.Services[0].Endpoints))
	}
	if u.Services[0].Endpoints[0].Port != 1 || !svc.Endpoints[0].Equal(orig) {
		t.Error("not the first endpoints in canonical order kept, or the sender's slice modified")
	}
}
