// Package countproxy relays TCP (and, for DNS, UDP) traffic from the bridge
// to one of its dependencies (a Consul agent, a DNS server, ZooKeeper,
// etcd) and counts what crosses it. The fault tests bound the bridge's
// work against a failing dependency from above with these counters, and
// the fault benchmark reports request rates from them: they are kept
// outside the bridge, so they hold whatever the bridge believes it did,
// and they keep counting while the dependency itself is dead or frozen.
//
// A dependency that is gone is relayed as the bridge would meet it without
// the proxy, as closely as a relay can: a connection whose upstream dial is
// refused is reset (the bridge's read or write fails with ECONNRESET rather
// than ECONNREFUSED, an error without an HTTP status all the same), and an
// upstream that closes or resets a connection has the bridge's side closed
// or reset in turn.
package countproxy

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// Counts are a proxy's counters since it started. They only grow.
type Counts struct {
	// Conns counts the TCP connections accepted from the bridge.
	Conns int64
	// Refused counts the connections reset because the upstream dial
	// failed (the dependency is down).
	Refused int64
	// Requests counts the requests seen from the bridge: HTTP/1.1 request
	// heads for an HTTP proxy, DNS messages (UDP datagrams and TCP frames)
	// for a DNS proxy, none for a TCP proxy. Encrypted streams (HTTPS)
	// carry no countable requests: Conns counts their handshakes.
	Requests int64
	// TooMany counts, for an HTTP proxy, the connections whose first
	// answer from the upstream was 429 Too Many Requests: how an HTTP
	// server's limit on connections per client (a Consul agent's
	// limits.http_max_conns_per_client) refuses a connection.
	TooMany int64
}

// Attempts is what a test bounds: every request seen, plus every
// connection that never got to carry one because the dependency was down;
// and at least one per connection, for streams whose requests cannot be
// counted (each TLS handshake is an attempt).
func (c Counts) Attempts() int64 { return max(c.Requests+c.Refused, c.Conns) }

// Sub returns the counts accrued since before.
func (c Counts) Sub(before Counts) Counts {
	return Counts{Conns: c.Conns - before.Conns, Refused: c.Refused - before.Refused, Requests: c.Requests - before.Requests,
		TooMany: c.TooMany - before.TooMany}
}

// Proxy relays 127.0.0.1:PORT to an upstream address. Its methods are safe
// for concurrent use.
type Proxy struct {
	// Addr is the proxy's 127.0.0.1:PORT, for TCP (and UDP with DNS).
	Addr string

	frames   func() framer
	http     bool // answers are looked at for refusals (TooMany)
	ln       net.Listener
	udp      net.PacketConn // DNS only
	upstream atomic.Pointer[string]
	conns    atomic.Int64
	refused  atomic.Int64
	requests atomic.Int64
	tooMany  atomic.Int64

	mu     sync.Mutex
	live   map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// TCP starts a proxy to upstream that counts connections only, for
// protocols whose requests it does not parse (ZooKeeper's, etcd's gRPC).
func TCP(upstream string) (*Proxy, error) {
	return start(upstream, false, func() framer { return noFrames{} }, false)
}

// HTTP starts a proxy to upstream that counts HTTP/1.1 requests.
func HTTP(upstream string) (*Proxy, error) {
	return start(upstream, false, func() framer { return &httpHeads{} }, true)
}

// DNS starts a proxy to upstream for TCP and UDP on the same port, which
// counts DNS messages from the bridge.
func DNS(upstream string) (*Proxy, error) {
	return start(upstream, true, func() framer { return &dnsFrames{} }, false)
}

func start(upstream string, dns bool, frames func() framer, http bool) (*Proxy, error) {
	p := &Proxy{live: map[net.Conn]struct{}{}, frames: frames, http: http}
	p.upstream.Store(&upstream)
	var err error
	// A port free for TCP and UDP now can be taken before both listeners
	// hold it; a few draws make that vanishingly rare.
	for range 5 {
		if err = p.listen(dns); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	p.wg.Go(p.accept)
	if dns {
		p.wg.Go(p.relayUDP)
	}
	return p, nil
}

func (p *Proxy) listen(udp bool) error {
	ports, err := freeport.Take(1)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if udp {
		if p.udp, err = net.ListenPacket("udp", addr); err != nil {
			ln.Close()
			return err
		}
	}
	p.ln, p.Addr = ln, addr
	return nil
}

// SetUpstream points the proxy at another address; connections already
// relayed stay with the old one (Cut ends them).
func (p *Proxy) SetUpstream(addr string) { p.upstream.Store(&addr) }

// Counts returns the counters.
func (p *Proxy) Counts() Counts {
	return Counts{Conns: p.conns.Load(), Refused: p.refused.Load(), Requests: p.requests.Load(), TooMany: p.tooMany.Load()}
}

// Cut resets every relayed TCP connection, as a dependency's crash resets
// the connections it held.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.live {
		reset(c)
	}
}

// Close stops the proxy, resets its connections and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	if p.udp != nil {
		p.udp.Close()
	}
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		if !p.track(c) {
			reset(c)
			return
		}
		p.wg.Go(func() { p.relay(c) })
	}
}

// track adds c to the live connections, unless the proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.live[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.live, c)
	p.mu.Unlock()
}

// dialTimeout bounds an upstream dial: a refused one fails at once on
// loopback, and a dependency that accepts nothing at all (its backlog full)
// is down as far as the bridge can tell.
const dialTimeout = 5 * time.Second

func (p *Proxy) relay(down net.Conn) {
	defer p.untrack(down)
	up, err := net.DialTimeout("tcp", *p.upstream.Load(), dialTimeout)
	if err != nil {
		p.refused.Add(1)
		reset(down)
		return
	}
	if !p.track(up) {
		reset(up)
		reset(down)
		return
	}
	defer p.untrack(up)
	// Each direction's end is passed on at once, so that a dependency's
	// crash reaches the bridge while the bridge is waiting on it.
	done := make(chan struct{})
	go func() {
		var w io.Writer = down
		if p.http {
			w = &refusal{w: down, n: &p.tooMany}
		}
		_, err := io.Copy(w, up)
		pass(down, err)
		close(done)
	}()
	_, err = io.Copy(&counter{w: up, f: p.frames(), n: &p.requests}, down)
	pass(up, err)
	<-done
}

// pass ends dst after the copy into it stopped with err: an error (a reset,
// say) is passed on as a reset, an orderly end as a close.
func pass(dst net.Conn, err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) {
		reset(dst)
		return
	}
	dst.Close()
}

// reset closes c with a TCP RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// udpTimeout bounds the wait for an upstream's answer to one datagram;
// the bridge has given up on it long before.
const udpTimeout = 10 * time.Second

// relayUDP forwards each datagram from a client through a socket of its
// own to the upstream and the answers back: a dead upstream answers
// nothing, as a dead DNS server does.
func (p *Proxy) relayUDP() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := p.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		p.requests.Add(1)
		msg := append([]byte(nil), buf[:n]...)
		p.wg.Go(func() { p.exchangeUDP(msg, from) })
	}
}

func (p *Proxy) exchangeUDP(msg []byte, from net.Addr) {
	up, err := net.Dial("udp", *p.upstream.Load())
	if err != nil {
		return
	}
	defer up.Close()
	_ = up.SetDeadline(time.Now().Add(udpTimeout))
	if _, err := up.Write(msg); err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	n, err := up.Read(buf)
	if err != nil {
		return
	}
	_, _ = p.udp.WriteTo(buf[:n], from)
}

// counter counts the requests in the bytes written through it.
type counter struct {
	w io.Writer
	f framer
	n *atomic.Int64
}

func (c *counter) Write(b []byte) (int, error) {
	c.n.Add(int64(c.f.feed(b)))
	return c.w.Write(b)
}

// refusal counts in n a connection whose first answer is an HTTP status
// line with code 429, passing every byte on to w.
type refusal struct {
	w    io.Writer
	n    *atomic.Int64
	head []byte // the answer's first bytes, until there are enough
	told bool
}

// statusLen is the length of "HTTP/1.1 429".
const statusLen = 12

func (r *refusal) Write(b []byte) (int, error) {
	if !r.told {
		r.head = append(r.head, b[:min(len(b), statusLen-len(r.head))]...)
		if len(r.head) == statusLen {
			r.told = true
			if string(r.head[:7]) == "HTTP/1." && string(r.head[8:]) == " 429" {
				r.n.Add(1)
			}
		}
	}
	return r.w.Write(b)
}

// framer finds the requests in a stream fed in pieces.
type framer interface {
	// feed takes the next bytes and returns how many requests began in
	// them.
	feed(b []byte) int
}

// noFrames counts nothing.
type noFrames struct{}

func (noFrames) feed([]byte) int { return 0 }

// httpHeads counts HTTP/1.1 request heads: the end of a head is the first
// empty line after a request line. The bridge's reads of a registry are
// GETs without bodies; a body would be counted only if it held an empty
// line, which a JSON body does not.
type httpHeads struct {
	tail [3]byte // the last bytes seen, for a CRLFCRLF split across feeds
	seen int
}

func (h *httpHeads) feed(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' && h.seen >= 3 && h.tail == [3]byte{'\r', '\n', '\r'} {
			n++
		}
		h.tail = [3]byte{h.tail[1], h.tail[2], c}
		h.seen++
	}
	return n
}

// dnsFrames counts DNS messages on TCP: each is a two-byte length, then
// that many bytes (RFC 1035 4.2.2).
type dnsFrames struct {
	hdr  []byte // a length not yet complete
	left int    // bytes of the current message still to come
}

func (d *dnsFrames) feed(b []byte) int {
	n := 0
	for len(b) > 0 {
		if d.left > 0 {
			k := min(d.left, len(b))
			d.left -= k
			b = b[k:]
			continue
		}
		d.hdr = append(d.hdr, b[0])
		b = b[1:]
		if len(d.hdr) == 2 {
			d.left = int(d.hdr[0])<<8 | int(d.hdr[1])
			d.hdr = d.hdr[:0]
			n++
		}
	}
	return n
}
