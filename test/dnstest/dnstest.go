// Package dnstest runs a real, independent authoritative DNS server
// (CoreDNS with its file plugin) on a loopback port for integration tests,
// serving one zone that the test rewrites while the server runs.
//
// The binary is found as the project's tests agree (see Binary); the
// server listens on 127.0.0.1 only, UDP and TCP on the same port, and the
// same port is kept across Stop and Restart.
package dnstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/testbin"
)

// Version is the CoreDNS release the tests are written against; it is
// built by scripts/tools.sh from the tools/coredns module.
const Version = "1.15.0"

// ReloadInterval is how often the file plugin looks for a new zone serial.
// The file plugin's own reload has no lower bound in CoreDNS 1.15.0 (only
// the Corefile's reload plugin needs 2s or more), so a zone edit is served
// at most this long after it was written.
const ReloadInterval = time.Second

// Binary returns the path of the CoreDNS binary: $XDSBRIDGE_COREDNS, else
// coredns on PATH, else the cached build
// ${XDSBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xdsbridge}/bin/coredns-1.15.0.
// Without one the test is skipped, or fails when XDSBRIDGE_INTEGRATION is
// "required".
func Binary(t testing.TB) string {
	t.Helper()
	return testbin.Find(t, "XDSBRIDGE_COREDNS", "coredns", Version)
}

// Server is a CoreDNS process serving one zone.
type Server struct {
	// Addr is the server's 127.0.0.1:port, for UDP and TCP.
	Addr string

	t        testing.TB
	bin      string
	dir      string
	origin   string
	corefile string
	zonefile string
	logfile  string

	mu       sync.Mutex
	serial   uint32
	records  string
	servfail []string
	refused  bool
	proc     *exec.Cmd
	exited   chan struct{}
}

// Start starts CoreDNS serving the zone origin (e.g. "example.org.") whose
// records, in zone file syntax with names relative to the origin or fully
// qualified, are records; the SOA and NS records are added. The server is
// stopped when the test ends.
func Start(t testing.TB, origin, records string) *Server {
	t.Helper()
	s := &Server{
		t:      t,
		bin:    Binary(t),
		dir:    t.TempDir(),
		origin: mdns.Fqdn(origin),
		serial: 1,
	}
	s.corefile = filepath.Join(s.dir, "Corefile")
	s.zonefile = filepath.Join(s.dir, "db.zone")
	s.logfile = filepath.Join(s.dir, "coredns.log")
	s.Addr = freeport.Addr(t)
	s.records = records
	if err := s.writeZone(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(s.logfile); err == nil {
				t.Logf("CoreDNS log:\n%s", tail(string(b), 4000))
			}
		}
	})
	s.Restart()
	return s
}

// SetZone replaces the zone's records (see Start) and bumps the SOA
// serial, so that CoreDNS serves them within ReloadInterval.
func (s *Server) SetZone(records string) {
	s.t.Helper()
	s.mu.Lock()
	s.serial++
	s.records = records
	err := s.writeZone()
	s.mu.Unlock()
	if err != nil {
		s.t.Fatal(err)
	}
}

// SetServFail makes the server answer SERVFAIL for the given names (exact,
// any type), or for none; the change needs a restart, which happens here
// when the server is running.
func (s *Server) SetServFail(names ...string) {
	s.t.Helper()
	s.reconfigure(func() { s.servfail = names })
}

// SetRefused makes the server answer REFUSED to every query (CoreDNS's acl
// plugin), or answer again; like SetServFail, it restarts a running
// server.
func (s *Server) SetRefused(refused bool) {
	s.t.Helper()
	s.reconfigure(func() { s.refused = refused })
}

// reconfigure applies change to the server's Corefile settings and
// restarts the server if it is running.
func (s *Server) reconfigure(change func()) {
	s.t.Helper()
	s.mu.Lock()
	change()
	running := s.proc != nil
	s.mu.Unlock()
	if running {
		s.Stop()
		s.Restart()
	}
}

// Stop terminates the server and waits for it to exit. The zone is kept.
func (s *Server) Stop() {
	s.mu.Lock()
	proc, exited := s.proc, s.exited
	s.proc = nil
	s.mu.Unlock()
	if proc == nil {
		return
	}
	_ = proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = proc.Process.Kill()
		<-exited
	}
}

// Restart starts the (stopped) server again on the same port, with the
// current zone, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	if s.proc != nil {
		s.mu.Unlock()
		s.t.Fatal("dnstest: Restart of a running server")
	}
	err := os.WriteFile(s.corefile, []byte(s.corefileText()), 0o644)
	s.mu.Unlock()
	if err != nil {
		s.t.Fatal(err)
	}
	logf, err := os.OpenFile(s.logfile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, "-conf", s.corefile)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.Tie(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatalf("starting CoreDNS: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	s.mu.Lock()
	s.proc, s.exited = cmd, exited
	s.mu.Unlock()
	if err := s.waitReady(exited); err != nil {
		s.Stop()
		b, _ := os.ReadFile(s.logfile)
		s.t.Fatalf("CoreDNS did not start: %v\n%s", err, tail(string(b), 4000))
	}
}

// queryTimeout bounds one query of the test's own. A running server
// answers at once and a stopped one is refused at once, so the bound only
// has to outlast a loaded machine.
const queryTimeout = 5 * time.Second

// Query sends one query to the server over UDP and returns the response.
func (s *Server) Query(name string, qtype uint16) (*mdns.Msg, error) {
	m := new(mdns.Msg)
	m.SetQuestion(mdns.Fqdn(name), qtype)
	m.SetEdns0(4096, false)
	c := &mdns.Client{Net: "udp", Timeout: queryTimeout}
	r, _, err := c.Exchange(m, s.Addr)
	return r, err
}

// WaitServes polls the server until its answer to name/qtype satisfies
// ok, and returns when it first did. The test fails after timeout.
func (s *Server) WaitServes(name string, qtype uint16, ok func(*mdns.Msg) bool, timeout time.Duration) time.Time {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if r, err := s.Query(name, qtype); err == nil && ok(r) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("CoreDNS did not serve the expected %s %s within %s", name, mdns.TypeToString[qtype], timeout)
		}
		<-tick.C
	}
}

func (s *Server) waitReady(exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		udp, uerr := s.Query(s.origin, mdns.TypeSOA)
		tc := &mdns.Client{Net: "tcp", Timeout: queryTimeout}
		m := new(mdns.Msg)
		m.SetQuestion(s.origin, mdns.TypeSOA)
		tcp, _, terr := tc.Exchange(m, s.Addr)
		if uerr == nil && terr == nil && s.answers(udp) && s.answers(tcp) {
			return nil
		}
		select {
		case <-exited:
			return errors.New("process exited")
		case <-ctx.Done():
			//nolint:errorlint // either may be nil (an answer without the SOA), which %v words as <nil> and %w does not
			return fmt.Errorf("no answer on %s: udp %v, tcp %v", s.Addr, uerr, terr)
		case <-tick.C:
		}
	}
}

// answers reports whether r is what the server answers when it is up: a
// success, or REFUSED while it refuses every query.
func (s *Server) answers(r *mdns.Msg) bool {
	s.mu.Lock()
	refused := s.refused
	s.mu.Unlock()
	return r.Rcode == mdns.RcodeSuccess || refused && r.Rcode == mdns.RcodeRefused
}

func (s *Server) corefileText() string {
	var b strings.Builder
	_, port, _ := net.SplitHostPort(s.Addr)
	fmt.Fprintf(&b, "%s:%s {\n\tbind 127.0.0.1\n", s.origin, port)
	if s.refused {
		b.WriteString("\tacl {\n\t\tblock\n\t}\n")
	}
	if len(s.servfail) > 0 {
		var alts []string
		for _, n := range s.servfail {
			alts = append(alts, regexp.QuoteMeta(mdns.CanonicalName(n)))
		}
		fmt.Fprintf(&b, "\ttemplate ANY ANY %s {\n\t\tmatch \"^(%s)$\"\n\t\trcode SERVFAIL\n\t\tfallthrough\n\t}\n",
			s.origin, strings.Join(alts, "|"))
	}
	fmt.Fprintf(&b, "\tfile %s {\n\t\treload %s\n\t}\n}\n", s.zonefile, ReloadInterval)
	return b.String()
}

// writeZone writes the zone atomically, so that a reload never reads half
// a file. The caller holds s.mu (or is Start).
func (s *Server) writeZone() error {
	text := fmt.Sprintf("$ORIGIN %s\n$TTL 60\n@ 60 IN SOA ns.%s hostmaster.%s %d 60 60 600 5\n@ 60 IN NS ns.%s\nns 60 IN A 127.0.0.1\n%s\n",
		s.origin, s.origin, s.origin, s.serial, s.origin, s.records)
	tmp := s.zonefile + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing zone: %w", err)
	}
	if err := os.Rename(tmp, s.zonefile); err != nil {
		return fmt.Errorf("writing zone: %w", err)
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
