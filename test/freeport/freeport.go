// Package freeport hands out loopback ports for the servers that tests and
// benchmarks start in other processes (Consul agents, CoreDNS, the bridge
// binary).
//
// A port the kernel picks for a listener on port 0 comes from its
// ephemeral range, which it also draws from for the local end of every
// outgoing connection. Between a test closing its probe listener and the
// child process binding the port, any connection on the machine can take
// it (a suite opening thousands of xDS client connections does), and the
// child fails with "address already in use". So ports are drawn at random
// below the ephemeral range, where the kernel never assigns one by itself,
// checked free for TCP and UDP, never handed out twice by one process, and
// leased against the other processes that use this package (a lock file
// per port, held until the process exits).
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// low is the lowest port handed out: above the ports of system services.
const low = 10000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Take returns n distinct ports of 127.0.0.1, each free for TCP and UDP
// when returned.
func Take(n int) ([]int, error) {
	high := ephemeralStart() - 1
	mu.Lock()
	defer mu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("no free loopback port in %d..%d after %d tries", low, high, tries)
		}
		p := low + rand.IntN(high-low+1)
		if handed[p] || !lease(p) || !free(p) {
			continue
		}
		handed[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// Ports is Take for a test, which it fails if no port is free.
func Ports(t testing.TB, n int) []int {
	t.Helper()
	ports, err := Take(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// Addr returns "127.0.0.1:PORT" for one port of Ports.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Ports(t, 1)[0]))
}

func free(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux
// reads it from procfs; elsewhere the IANA range's start, 49152, with
// Linux's default 32768 as the safer bound).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > low+1000 {
				return n
			}
		}
	}
	return 32768
}
