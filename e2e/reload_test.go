package e2e

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// consulCounter is a reverse proxy in front of a Consul agent that counts
// the connections the bridge opens and the reads that start a watch (those
// without an index: a source that restarts makes them again). The
// source's liveness probes (/v1/status/leader) and censuses
// (/v1/internal/ui/nodes) are not counted: they come periodically anyway. It can also hold the reads that start a watch until
// released, as a slow agent would (hold).
type consulCounter struct {
	addr         string
	conns, fresh atomic.Int64
	// watching counts the blocking service reads in flight: the source's
	// per-service watches, each opened once its service has been read;
	// cut counts those the bridge gave up before they answered (a source
	// that stops cancels its watches).
	watching, cut atomic.Int64
	// held counts the reads held so far; open is closed while none is.
	held atomic.Int64
	mu   sync.Mutex
	open chan struct{}
}

// hold makes the reads that start a watch wait until release: a source
// instance started meanwhile cannot sync, while the watches of a running
// one go on.
func (c *consulCounter) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.open:
		c.open = make(chan struct{})
	default: // held already
	}
}

// release lets the held reads through, and every one after.
func (c *consulCounter) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.open:
	default:
		close(c.open)
	}
}

// pass waits until the reads that start a watch may pass, or ctx is done.
func (c *consulCounter) pass(ctx context.Context) bool {
	c.mu.Lock()
	open := c.open
	c.mu.Unlock()
	select {
	case <-open:
		return true
	default:
	}
	c.held.Add(1)
	select {
	case <-open:
		return true
	case <-ctx.Done():
		return false
	}
}

func countConsul(t *testing.T, agentAddr string) *consulCounter {
	t.Helper()
	c := &consulCounter{open: make(chan struct{})}
	close(c.open)
	target, err := url.Parse("http://" + agentAddr)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	// Blocking queries cut by the end of the test are no news.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("index") == "" && !strings.HasPrefix(r.URL.Path, "/v1/status/") &&
				!strings.HasPrefix(r.URL.Path, "/v1/internal/ui/") {
				c.fresh.Add(1)
				if !c.pass(r.Context()) {
					return
				}
			}
			if r.URL.Query().Get("index") != "" && strings.HasPrefix(r.URL.Path, "/v1/health/service/") {
				c.watching.Add(1)
				defer func() {
					c.watching.Add(-1)
					if r.Context().Err() != nil {
						c.cut.Add(1)
					}
				}()
			}
			proxy.ServeHTTP(w, r)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				c.conns.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		c.release()
		srv.Close()
	})
	c.addr = lis.Addr().String()
	return c
}

// TestReloadSIGHUP checks a reload end to end with the real binary, a
// real Consul agent and a real CoreDNS: a SIGHUP with a changed DNS source
// and an unchanged Consul source leaves the Consul source's watches alone
// (no new connection, no fresh read), applies the DNS change, and drops no
// stream; a SIGHUP with an invalid file changes nothing and the process
// lives.
func TestReloadSIGHUP(t *testing.T) {
	agent := consultest.Start(t)
	dns := dnstest.Start(t, "example.org.", "a IN A 10.0.1.1\nb IN A 10.0.2.2\n")
	counter := countConsul(t, agent.HTTPAddr)
	if err := agent.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: "web-1", Name: "web", Address: "10.0.0.1", Port: 8080}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	xdsAddr, adminAddr := freeport.Addr(t), freeport.Addr(t)
	cfg := filepath.Join(dir, "bridge.yaml")
	config := func(host, consulExtra string) string {
		return fmt.Sprintf(`
xds: {listen: %s}
admin: {listen: %s}
sources:
  - name: consul
    type: consul
    address: %s
    services: {exclude: [consul]}%s
  - name: legacy
    type: dns
    servers: [%s]
    services:
      - {cluster: legacy, host: %s.example.org, port: 80}
`, xdsAddr, adminAddr, counter.addr, consulExtra, dns.Addr, host)
	}
	writeFile(t, cfg, config("a", ""))
	p := start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	clients := []*envoysim.Client{
		startClient(t, xdsAddr, envoysim.Options{Node: "sotw"}),
		startClient(t, xdsAddr, envoysim.Options{Node: "delta", Delta: true}),
	}
	serves := func(what, legacy string) {
		t.Helper()
		for _, c := range clients {
			waitClient(t, c, what, func(s envoysim.State) bool {
				web, leg := endpoints(s.Assignments["web"]), endpoints(s.Assignments["legacy"])
				return len(web) == 1 && strings.HasPrefix(web[0], "10.0.0.1:8080") &&
					len(leg) == 1 && strings.HasPrefix(leg[0], legacy+":80")
			})
		}
	}
	serves("web from Consul and legacy at 10.0.1.1", "10.0.1.1")
	// The watch of web opens its connection after web's first read: the
	// count is taken once it is in place.
	bridgetest.Eventually(t, patience, "the watch of web", func() bool { return counter.watching.Load() == 1 })
	_, before := bridgetest.Get("http://" + adminAddr + "/clients")
	conns, fresh, cut := counter.conns.Load(), counter.fresh.Load(), counter.cut.Load()

	writeFile(t, cfg, config("b", ""))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(10*time.Second, "configuration reloaded", "kept=consul", "started=legacy", "stopped=legacy")
	serves("legacy moved to 10.0.2.2", "10.0.2.2")
	// A restarted source cancels its watches and reads every service
	// again without an index. The number of connections is only logged:
	// the source's pool may open one for reasons of its own (a probe
	// whose idle connection the agent closed), restart or not.
	if f, x := counter.fresh.Load(), counter.cut.Load(); f != fresh || x != cut {
		t.Errorf("the unchanged Consul source was restarted: watch-starting reads %d -> %d, watches cut %d -> %d", fresh, f, cut, x)
	}
	t.Logf("Consul source across the reload: connections %d -> %d, %d watch-starting reads, %d watches cut (unchanged)", conns, counter.conns.Load(), fresh, cut)

	writeFile(t, cfg, "xds: {listen: [}\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(10*time.Second, "configuration reload rejected")
	if code, body := bridgetest.Get("http://" + adminAddr + "/metrics"); code != http.StatusOK ||
		!strings.Contains(body, `xdsbridge_config_reloads_total{result="rejected"} 1`) ||
		!strings.Contains(body, `xdsbridge_config_reloads_total{result="applied"} 1`) {
		t.Errorf("/metrics = %d, want one applied and one rejected reload", code)
	}
	serves("the same state after the rejected reload", "10.0.2.2")

	for i, c := range clients {
		if err := c.Err(); err != nil {
			t.Errorf("client %d: stream failed: %v", i, err)
		}
	}
	if _, after := bridgetest.Get("http://" + adminAddr + "/clients"); connectedTimes(after) != connectedTimes(before) {
		t.Errorf("streams changed across the reloads:\nbefore %s\nafter  %s", connectedTimes(before), connectedTimes(after))
	}
	if code, _ := bridgetest.Get("http://" + adminAddr + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d after the reloads", code)
	}

	// The measure can fail: a changed Consul entry does restart the source,
	// which cuts its watches, opens a connection and starts them again.
	conns, fresh, cut = counter.conns.Load(), counter.fresh.Load(), counter.cut.Load()
	writeFile(t, cfg, config("b", "\n    retry_max: 5s"))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(10*time.Second, "configuration reloaded", "kept=legacy", "started=consul")
	bridgetest.Eventually(t, patience, "the changed Consul source to start its watches", func() bool {
		return counter.conns.Load() > conns && counter.fresh.Load() > fresh && counter.cut.Load() > cut
	})
	serves("the same state from the restarted Consul source", "10.0.2.2")
}

// connectedTimes extracts the "connected" fields of /clients, one per stream.
func connectedTimes(clients string) string {
	var out []string
	for l := range strings.Lines(clients) {
		if strings.Contains(l, `"connected"`) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, " ")
}
