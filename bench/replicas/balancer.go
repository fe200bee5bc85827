package replicas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Balancer is a TCP load balancer for a fleet of xDS clients in front of
// bridge replicas, as a Kubernetes Service or a cloud TCP load balancer
// puts one: each accepted connection goes to the next ready backend in
// turn (round robin over the backends that are ready at that moment), and
// lives as long as both sides do. When a backend dies its connections
// end, and the clients' reconnects are spread over the backends that are
// still ready. A connection is never moved: only a new one picks again.
type Balancer struct {
	Backends []Backend
	// Event, if set, is told of every proxied connection when it opens
	// and when it closes, from the connection's goroutine.
	Event func(BalancerEvent)

	next atomic.Uint64
}

// Backend is one upstream of a Balancer.
type Backend struct {
	Addr string
	// Ready reports whether the backend may take new connections (a
	// readiness probe); nil means always. A backend that is ready but
	// refuses the connection is skipped for the next.
	Ready func() bool
}

// BalancerEvent is a proxied connection opened or closed: the client's
// port (its local port, which the client can match with its own socket)
// and the index of the backend it went to.
type BalancerEvent struct {
	Open       bool
	ClientPort int
	Backend    int
}

// String renders the event as a line of `xdsload balance`'s output.
func (e BalancerEvent) String() string {
	op := "close"
	if e.Open {
		op = "open"
	}
	return fmt.Sprintf("%s %d %d", op, e.ClientPort, e.Backend)
}

// ParseBalancerEvent parses a line written by String.
func ParseBalancerEvent(line string) (BalancerEvent, error) {
	var op string
	var e BalancerEvent
	if _, err := fmt.Sscanf(line, "%s %d %d", &op, &e.ClientPort, &e.Backend); err != nil || (op != "open" && op != "close") {
		return e, fmt.Errorf("parsing balancer event %q: not \"open|close PORT BACKEND\"", line)
	}
	e.Open = op == "open"
	return e, nil
}

// Serve accepts connections on ln until ctx ends, then closes ln and
// every proxied connection and returns once they are gone.
func (b *Balancer) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting on %s: %w", ln.Addr(), err)
		}
		wg.Go(func() { b.proxy(ctx, c) })
	}
}

// pick dials the next ready backend in turn, drawing further turns while
// backends refuse; it returns the connection and the backend's index, or
// -1 when none is ready or all refuse.
func (b *Balancer) pick(ctx context.Context) (net.Conn, int) {
	var ready []int
	for i, be := range b.Backends {
		if be.Ready == nil || be.Ready() {
			ready = append(ready, i)
		}
	}
	if len(ready) == 0 {
		return nil, -1
	}
	// A refused dial draws the next turn rather than falling to the next
	// backend in the list: that one would take the dead backend's share
	// on top of its own until the readiness probe notices the death.
	d := net.Dialer{Timeout: 2 * time.Second}
	for range 2 * len(ready) {
		i := ready[int(b.next.Add(1)-1)%len(ready)]
		if c, err := d.DialContext(ctx, "tcp", b.Backends[i].Addr); err == nil {
			return c, i
		}
	}
	return nil, -1
}

// Dial connects to the next ready backend in turn, as a client that
// balances its own connections does (Envoy's cluster of the xDS
// servers: round robin over its healthy hosts for each new connection),
// and returns the backend's index. The connection is counted as open
// (Event) until it is closed.
func (b *Balancer) Dial(ctx context.Context) (net.Conn, int, error) {
	c, i := b.pick(ctx)
	if c == nil {
		return nil, -1, errNoBackend
	}
	if b.Event == nil {
		return c, i, nil
	}
	e := BalancerEvent{Open: true, ClientPort: localPort(c), Backend: i}
	b.Event(e)
	return &closeHook{Conn: c, hook: func() { e.Open = false; b.Event(e) }}, i, nil
}

var errNoBackend = errors.New("no backend ready and accepting")

// closeHook runs hook once, on the first Close.
type closeHook struct {
	net.Conn
	once sync.Once
	hook func()
}

func (c *closeHook) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.hook)
	return err
}

// proxy copies bytes both ways between a client and the backend it
// picked until either side ends or ctx does, then closes both.
func (b *Balancer) proxy(ctx context.Context, c net.Conn) {
	defer c.Close()
	up, i := b.pick(ctx)
	if up == nil {
		return
	}
	defer up.Close()
	port := 0
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		port = a.Port
	}
	if b.Event != nil {
		b.Event(BalancerEvent{Open: true, ClientPort: port, Backend: i})
		defer b.Event(BalancerEvent{ClientPort: port, Backend: i})
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	ended := 0
	select {
	case <-done:
		ended = 1
	case <-ctx.Done():
	}
	// Closing both ends the other copy; wait for it so that no goroutine
	// outlives the connection.
	c.Close()
	up.Close()
	for ; ended < 2; ended++ {
		<-done
	}
}

// ReadinessProbe returns a Ready function for a backend whose readiness
// is a GET of url answering 200, probed every interval until ctx ends; it
// starts as not ready until the first probe passes.
func ReadinessProbe(ctx context.Context, url string, interval time.Duration) func() bool {
	var ok atomic.Bool
	hc := &http.Client{Timeout: interval, Transport: &http.Transport{DisableKeepAlives: true}}
	probe := func() {
		resp, err := hc.Get(url)
		if err != nil {
			ok.Store(false)
			return
		}
		resp.Body.Close()
		ok.Store(resp.StatusCode == http.StatusOK)
	}
	probe()
	go every(ctx, interval, probe)
	return ok.Load
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// localPort is the port of a connection's local address (0 if not TCP).
func localPort(c net.Conn) int {
	a, _ := c.LocalAddr().(*net.TCPAddr)
	if a == nil {
		return 0
	}
	return a.Port
}
