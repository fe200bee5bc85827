package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 5 {
		for _, p := range Ports(t, 8) {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			if p < low || p >= ephemeralStart() {
				t.Fatalf("port %d outside %d..%d", p, low, ephemeralStart()-1)
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d not free: %v", p, err)
			}
			l.Close()
		}
	}
}

func TestBoundPortIsNotFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if free(l.Addr().(*net.TCPAddr).Port) {
		t.Fatal("a bound port reported free")
	}
}
