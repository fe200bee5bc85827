package replicas

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// connBook counts the fleet's connections per replica from balancer
// events and samples the counts every second.
type connBook struct {
	mu      sync.Mutex
	byPort  map[int]int // client port -> backend
	open    []int       // connections per backend
	samples []spreadSample
}

func newConnBook(backends int) *connBook {
	return &connBook{byPort: map[int]int{}, open: make([]int, backends)}
}

func (b *connBook) event(e BalancerEvent) {
	if e.Backend < 0 || e.Backend >= len(b.open) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.Open {
		b.byPort[e.ClientPort] = e.Backend
		b.open[e.Backend]++
	} else {
		delete(b.byPort, e.ClientPort)
		b.open[e.Backend]--
	}
}

func (b *connBook) counts() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.open...)
}

// backendOf is the backend a client's connection (by its local port)
// went to, -1 if unknown.
func (b *connBook) backendOf(port int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i, ok := b.byPort[port]; ok {
		return i
	}
	return -1
}

// sample records the connections per backend every second until ctx
// ends.
func (b *connBook) sample(ctx context.Context) {
	go every(ctx, time.Second, func() {
		c := b.counts()
		b.mu.Lock()
		b.samples = append(b.samples, spreadSample{At: time.Duration(time.Now().UnixNano()), Clients: c})
		b.mu.Unlock()
	})
}

// spread returns the samples with times relative to at.
func (b *connBook) spread(at time.Time) []spreadSample {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]spreadSample, len(b.samples))
	for i, s := range b.samples {
		out[i] = spreadSample{At: time.Duration(int64(s.At) - at.UnixNano()), Clients: s.Clients}
	}
	return out
}

// route is how the fleet reaches the replicas: the address its clients
// dial and how, the book of their connections, and the balancer process
// (proxy only).
type route struct {
	addr string
	dial func(ctx context.Context, addr string) (net.Conn, int, error)
	book *connBook
	proc *exec.Cmd
	done chan struct{}
}

// startRoute sets up the fleet's way to the bridges, each ready when its
// /readyz answers 200: in "client" mode each client picks the next ready
// replica itself for every new connection, as Envoy balances the
// connections to its xDS cluster's hosts; in "proxy" mode the clients
// dial a TCP balancer in a process of its own (`xdsload balance`), whose
// CPU is measured apart and which must say it listens within timeout.
func startRoute(ctx context.Context, mode, self string, bridges []*replica, logPath string, timeout time.Duration) (*route, error) {
	rt := &route{book: newConnBook(len(bridges))}
	if mode == "client" {
		bal := &Balancer{Event: rt.book.event}
		for _, b := range bridges {
			bal.Backends = append(bal.Backends, Backend{Addr: b.xds, Ready: ReadinessProbe(ctx, "http://"+b.admin+"/readyz", 250*time.Millisecond)})
		}
		// No name to resolve: the dialer picks the address.
		rt.addr = "passthrough:///replicas"
		rt.dial = func(ctx context.Context, _ string) (net.Conn, int, error) { return bal.Dial(ctx) }
		return rt, nil
	}
	if mode != "proxy" {
		return nil, fmt.Errorf("balancer %q: want client or proxy", mode)
	}
	p, err := freeport.Take(1)
	if err != nil {
		return nil, err
	}
	var backends []string
	for _, b := range bridges {
		backends = append(backends, b.xds+"="+"http://"+b.admin+"/readyz")
	}
	rt.addr = "127.0.0.1:" + strconv.Itoa(p[0])
	rt.dial = func(ctx context.Context, addr string) (net.Conn, int, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return c, -1, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	rt.proc = exec.Command(self, "balance", "--listen", rt.addr, "--backends", strings.Join(backends, ","))
	rt.proc.Stderr = logf
	out, err := rt.proc.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := rt.proc.Start(); err != nil {
		return nil, fmt.Errorf("starting the balancer: %w", err)
	}
	rt.done = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(rt.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "READY" {
				close(ready)
				continue
			}
			if e, err := ParseBalancerEvent(sc.Text()); err == nil {
				rt.book.event(e)
			}
		}
	}()
	select {
	case <-ready:
		return rt, nil
	case <-rt.done:
		proc.Stop(rt.proc)
		return nil, fmt.Errorf("the balancer exited before it was ready (see %s)", logPath)
	case <-time.After(timeout):
		rt.stop()
		return nil, fmt.Errorf("the balancer not ready after %v", timeout)
	case <-ctx.Done():
		rt.stop()
		return nil, ctx.Err()
	}
}

// backendOf is the replica a client's current connection reached.
func (rt *route) backendOf(m *roamer) int {
	if b := int(m.backend.Load()); b >= 0 {
		return b
	}
	return rt.book.backendOf(int(m.port.Load()))
}

func (rt *route) stop() {
	if rt.proc != nil {
		proc.Stop(rt.proc)
		<-rt.done
	}
}
