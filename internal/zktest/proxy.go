package zktest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server and counts them, so that a
// test can bound from above how often a client connects while the server
// is away: each connection it accepts is one attempt of the client,
// whether the server behind answers or not.
type Proxy struct {
	Addr     string
	accepted atomic.Int64
	ln       net.Listener
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// NewProxy listens on a loopback port and forwards to target until the
// test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.CloseAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			go p.forward(c, target)
		}
	}()
	return p
}

// Accepted is the number of connections accepted so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// CloseAll cuts every connection in flight.
func (p *Proxy) CloseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) forward(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	p.track(c, true)
	p.track(s, true)
	defer p.track(c, false)
	defer p.track(s, false)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
}
