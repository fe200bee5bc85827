package replicas

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testBackend accepts connections and writes its index on each, then
// holds it until the client or kill closes it.
type testBackend struct {
	idx   byte
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startTestBackend(t *testing.T, idx byte, addr string) *testBackend {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b := &testBackend{idx: idx, ln: ln}
	b.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			_, _ = c.Write([]byte{idx})
		}
	})
	t.Cleanup(b.kill)
	return b
}

// kill closes the listener and every connection, as a process killed.
func (b *testBackend) kill() {
	b.ln.Close()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
}

// TestBalancer: round robin over ready backends; a dead backend's clients
// are cut and their reconnects spread over the live ones; a backend not
// ready gets nothing; events name each client's port and backend.
func TestBalancer(t *testing.T) {
	var be []*testBackend
	var ready [3]atomic.Bool
	bal := &Balancer{}
	for i := range 3 {
		be = append(be, startTestBackend(t, byte(i), "127.0.0.1:0"))
		ready[i].Store(true)
		bal.Backends = append(bal.Backends, Backend{Addr: be[i].ln.Addr().String(), Ready: ready[i].Load})
	}
	events := make(chan BalancerEvent, 100)
	bal.Event = func(e BalancerEvent) { events <- e }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- bal.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()

	// connect returns the backend a new client reached, and the client.
	connect := func() (int, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil {
			t.Fatalf("reading the backend's index: %v", err)
		}
		e := <-events
		if !e.Open || e.ClientPort != localPort(c) || e.Backend != int(b[0]) {
			t.Fatalf("event %+v for a client on port %d at backend %d", e, localPort(c), b[0])
		}
		return int(b[0]), c
	}
	count := func(n int) [3]int {
		var got [3]int
		for range n {
			i, _ := connect()
			got[i]++
		}
		return got
	}

	clients := map[int][]net.Conn{}
	for range 6 {
		i, c := connect()
		clients[i] = append(clients[i], c)
	}
	if len(clients[0]) != 2 || len(clients[1]) != 2 || len(clients[2]) != 2 {
		t.Fatalf("6 clients over 3 backends: %d %d %d, want 2 each", len(clients[0]), len(clients[1]), len(clients[2]))
	}

	// Backend 0 dies (its readiness not yet noticed): its clients are cut.
	be[0].kill()
	for _, c := range clients[0] {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a client of the dead backend still reads")
		}
	}
	for range 2 {
		if e := <-events; e.Open || e.Backend != 0 {
			t.Errorf("event %+v, want backend 0's connections closed", e)
		}
	}
	if got := count(4); got != [3]int{0, 2, 2} {
		t.Errorf("reconnects with backend 0 dead: %v, want [0 2 2]", got)
	}

	// Backend 1 not ready: everything goes to backend 2.
	ready[1].Store(false)
	if got := count(3); got != [3]int{0, 0, 3} {
		t.Errorf("with backend 1 not ready: %v, want [0 0 3]", got)
	}

	// Backend 0 back on its port and every backend ready: all take turns.
	ready[1].Store(true)
	be[0] = startTestBackend(t, 0, bal.Backends[0].Addr)
	if got := count(6); got != [3]int{2, 2, 2} {
		t.Errorf("every backend back: %v, want [2 2 2]", got)
	}
}

func TestBalancerEventLine(t *testing.T) {
	for _, e := range []BalancerEvent{{Open: true, ClientPort: 40000, Backend: 2}, {ClientPort: 1, Backend: 0}} {
		got, err := ParseBalancerEvent(e.String())
		if err != nil || got != e {
			t.Errorf("%q parsed as %+v (%v)", e.String(), got, err)
		}
	}
	for _, bad := range []string{"", "open 1", "move 1 2", "READY"} {
		if _, err := ParseBalancerEvent(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
