package zookeeper

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/xdsbridge/xdsbridge/sources"
)

// The client library (github.com/go-zookeeper/zk) reconnects by itself,
// resumes the session, and re-arms the watches of a resumed session with
// SetWatches. What it does not do is pace its reconnects: it dials the
// servers in turn and sleeps a fixed second after each round. So the
// source hands it its own host list (hosts, which does no DNS at start)
// and its own dialer (pacer), which waits a sources.Backoff before every
// attempt that follows a failure, whatever the failure was: refused,
// timed out, a TLS error, or a server that closed the connection before a
// session was established. The library's second per round comes on top;
// it never makes the loop faster.

// dialTimeout bounds one TCP connect and TLS handshake.
const dialTimeout = 5 * time.Second

// stableSession is how long a session must have lasted for its loss to
// be retried at once: a server that accepts sessions and drops them right
// away is retried with backoff like one that refuses.
const stableSession = 10 * time.Second

// pacer is the client's dialer. Every attempt after a failed one waits
// the next backoff; a session that lasted stableSession resets it.
type pacer struct {
	ctx    context.Context
	dial   func(ctx context.Context, addr string) (net.Conn, error)
	report func(error)

	mu        sync.Mutex
	bo        sources.Backoff
	dialed    bool      // an attempt was made
	lastOK    bool      // the last attempt connected
	sessionAt time.Time // when the last session was established, zero if none since the last attempt
}

// Dial implements zk.Dialer.
func (p *pacer) Dial(_, addr string, _ time.Duration) (net.Conn, error) {
	p.mu.Lock()
	var wait time.Duration
	switch {
	case !p.dialed:
	case !p.sessionAt.IsZero() && time.Since(p.sessionAt) >= stableSession:
		p.bo.Reset()
	default:
		if p.lastOK && p.sessionAt.IsZero() {
			p.report(fmt.Errorf("connecting to %s: the server closed the connection before a session was established", addr))
		}
		wait = p.bo.Next()
	}
	p.dialed, p.sessionAt = true, time.Time{}
	p.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return nil, p.ctx.Err()
		}
	}
	c, err := p.dial(p.ctx, addr)
	p.mu.Lock()
	p.lastOK = err == nil
	p.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("connecting to %s: %w", addr, err)
		p.report(err)
	}
	return c, err
}

// established records that a session was established.
func (p *pacer) established() {
	p.mu.Lock()
	p.sessionAt = time.Now()
	p.mu.Unlock()
}

// hosts is the client's zk.HostProvider: the configured servers in
// turn, resolved by the dialer at every attempt rather than once at start
// (the library's own provider fails the whole source when DNS does).
type hosts struct {
	servers []string
	next    int
	tried   int // attempts since the last session
	mu      sync.Mutex
}

func (h *hosts) Init([]string) error { return nil }
func (h *hosts) Len() int            { return len(h.servers) }

// Next returns the next server; retryStart is true after a whole round
// failed, which makes the library fail the requests queued meanwhile
// rather than hold them until a server answers.
func (h *hosts) Next() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.servers[h.next%len(h.servers)]
	h.next++
	h.tried++
	return s, h.tried > len(h.servers)
}

func (h *hosts) Connected() {
	h.mu.Lock()
	h.tried = 0
	h.mu.Unlock()
}

// dialer returns the function that connects to one server: TCP, then TLS
// when configured.
func (c *Config) dialer() (func(ctx context.Context, addr string) (net.Conn, error), error) {
	var tc *tls.Config
	if c.TLS.set() {
		tc = &tls.Config{ServerName: c.TLS.ServerName, MinVersion: tls.VersionTLS12}
		if c.TLS.CAFile != "" {
			pem, err := os.ReadFile(c.TLS.CAFile)
			if err != nil {
				return nil, fmt.Errorf("reading tls.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("tls.ca_file %s holds no PEM certificate", c.TLS.CAFile)
			}
			tc.RootCAs = pool
		}
		if c.TLS.CertFile != "" {
			cert, key := c.TLS.CertFile, c.TLS.KeyFile
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				kp, err := tls.LoadX509KeyPair(cert, key)
				if err != nil {
					return nil, fmt.Errorf("loading tls.cert_file and tls.key_file: %w", err)
				}
				return &kp, nil
			}
		}
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil || tc == nil {
			return conn, err
		}
		cfg := tc.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tconn := tls.Client(conn, cfg)
		if err := tconn.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		return tconn, nil
	}, nil
}

// password reads auth.password_file.
func (c *Config) password() (string, error) {
	b, err := os.ReadFile(c.Auth.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("reading auth.password_file: %w", err)
	}
	p := string(trimNewline(b))
	if p == "" {
		return "", errors.New("auth.password_file is empty")
	}
	return p, nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// zkLog sends the library's log lines to the source's logger at debug
// level: the source logs what matters itself, once per state change.
type zkLog struct{ l *slog.Logger }

func (z zkLog) Printf(format string, args ...any) {
	z.l.Debug("zk client: " + fmt.Sprintf(format, args...))
}

// inbox is how the client's goroutines reach the loop. The library calls
// its event callback on its receive goroutine, which must not block, so
// the inbox only records: watch events as a set of paths to read again
// (bounded by the znodes watched), the latest session state, whether the
// session expired or was lost since the loop last looked, and failed
// connection attempts. wake tells the loop there is something.
type inbox struct {
	wake chan struct{}
	up   atomic.Bool // the client has a session now

	mu        sync.Mutex
	paths     map[string]struct{}
	state     zk.State
	expired   bool
	lost      bool
	dialFails []error
}

func newInbox() *inbox {
	return &inbox{wake: make(chan struct{}, 1), paths: map[string]struct{}{}, state: zk.StateDisconnected}
}

// maxDialFails bounds the failed attempts the inbox keeps between two
// looks of the loop; attempts are paced, so it is never reached in
// practice.
const maxDialFails = 64

func (b *inbox) event(ev zk.Event) {
	b.mu.Lock()
	switch ev.Type {
	case zk.EventSession:
		b.state = ev.State
		b.up.Store(ev.State == zk.StateHasSession)
		switch ev.State {
		case zk.StateExpired:
			b.expired = true
		case zk.StateDisconnected:
			b.lost = true
		}
	case zk.EventNodeCreated, zk.EventNodeDeleted, zk.EventNodeDataChanged, zk.EventNodeChildrenChanged:
		b.paths[ev.Path] = struct{}{}
	}
	b.mu.Unlock()
	b.poke()
}

func (b *inbox) dialFailed(err error) {
	b.mu.Lock()
	if len(b.dialFails) < maxDialFails {
		b.dialFails = append(b.dialFails, err)
	}
	b.mu.Unlock()
	b.poke()
}

func (b *inbox) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// mail is what the loop takes from the inbox at once.
type mail struct {
	paths     []string
	state     zk.State
	expired   bool
	lost      bool
	dialFails []error
}

func (b *inbox) take() mail {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := mail{state: b.state, expired: b.expired, lost: b.lost, dialFails: b.dialFails}
	for p := range b.paths {
		m.paths = append(m.paths, p)
	}
	clear(b.paths)
	b.expired, b.lost, b.dialFails = false, false, nil
	return m
}
