package faults

import (
	"crypto/tls"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/countproxy"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// The Consul source's default backoff.
const (
	consulRetryMin = 250 * time.Millisecond
	consulRetryMax = 30 * time.Second
)

// consulSpan is how long the tests watch the bridge during a Consul
// fault: long enough that a loop retrying without a backoff would make
// thousands of attempts, where the backoff allows a few dozen. The window
// ends on a condition too (the source reported stale); the span only
// makes sure it is long enough to tell.
const consulSpan = 3 * time.Second

// consulLoops bounds the source's loops that each retry on a backoff of
// their own against a failing agent: the blocking query of each watched
// service, the bulk queries, the liveness probe and the census, with room
// to spare.
func consulLoops(services int) int64 { return int64(2*services + 8) }

// consulRig is a Consul agent behind a counting proxy and a bridge
// reading it with default settings.
type consulRig struct {
	agent    *consultest.Agent
	proxy    *countproxy.Proxy
	b        *bridge
	w        *watcher
	services int
}

func register(t *testing.T, c *api.Client, id, name, addr string, port int) {
	t.Helper()
	if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: id, Name: name, Address: addr, Port: port}); err != nil {
		t.Fatal(err)
	}
}

// registerAll registers the rig's first state: web (2 instances), api and
// db (one each).
func registerAll(t *testing.T, c *api.Client) view {
	t.Helper()
	register(t, c, "web-1", "web", "10.0.0.1", 80)
	register(t, c, "web-2", "web", "10.0.0.2", 80)
	register(t, c, "api-1", "api", "10.0.1.1", 8080)
	register(t, c, "db-1", "db", "10.0.2.1", 5432)
	return view{"web": {"10.0.0.1:80", "10.0.0.2:80"}, "api": {"10.0.1.1:8080"}, "db": {"10.0.2.1:5432"}}
}

// consulEntry is the bridge's source entry for an agent at address.
func consulEntry(address, extra string) string {
	return fmt.Sprintf("  - name: consul\n    type: consul\n    address: %s\n    services: {exclude: [consul]}\n%s", address, extra)
}

// during checks the bridge while the agent is failing: it waits until the
// source is stale, at least consulSpan after the fault began, then bounds
// the attempts the proxy counted by what the backoff of every loop allows,
// and the log lines by one failing period.
func (r *consulRig) during(t *testing.T, win *window, what string) {
	t.Helper()
	bridgetest.Eventually(t, patience, "the source stale, "+consulSpan.String()+" into the fault", func() bool {
		return time.Since(win.start) >= consulSpan && r.b.status("consul").Stale
	})
	win.checkWork(what, func(d time.Duration) int64 {
		return consulLoops(r.services) * (paced(consulRetryMin, consulRetryMax, d) + 1)
	})
	win.checkLogs("consul", 2)
}

// TestConsulFaults takes a Consul agent away three ways, one after the
// other under one bridge: killed, then restarted empty; stopped cleanly,
// then started again; frozen (SIGSTOP), then resumed with its catalog
// unchanged. During each the bridge sends the agent no more than its
// backoff allows (the proxy in front counts), logs one failing period,
// shows the source stale and keeps every endpoint at the watcher; after
// each, the agent's new registrations reach the watcher, and after the
// freeze every service is watched again without a reset.
func TestConsulFaults(t *testing.T) { //nolint:tparallel // its subtests are the steps of one fault, in order; the test runs beside the other faults
	t.Parallel()
	r := &consulRig{agent: consultest.Start(t), services: 3}
	p, err := countproxy.HTTP(r.agent.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r.proxy = p
	want := registerAll(t, r.agent.Client())
	r.b = startBridge(t, t.TempDir(), consulEntry(p.Addr, ""), bridgeOptions{})
	r.w = startWatcher(t, r.b.xds)
	b, w := r.b, r.w
	w.waitHolds("the agent's services", want)
	b.baseline()

	// back registers the first state on an agent that came back empty,
	// and one more instance of web, and waits for the watcher to hold
	// them all (the removal guard holds what the refill has not brought
	// back, so no removal reaches the watcher meanwhile).
	instances := 2 // of web
	back := func(t *testing.T) {
		t.Helper()
		c := r.agent.Client()
		want := registerAll(t, c)
		instances++
		for i := 3; i <= instances; i++ {
			addr := fmt.Sprintf("10.0.0.%d", i)
			register(t, c, fmt.Sprintf("web-%d", i), "web", addr, 80)
			want["web"] = append(want["web"], addr+":80")
		}
		w.wait("the agent's new state "+want.String(), func(v view) bool { return holds(v, want) })
		b.waitStatus("consul", "fresh again", func(s manager.SourceStatus) bool { return !s.Stale })
	}
	// churn raises the index of web's instances far above where an agent
	// that comes back empty starts, as a long-lived agent's is: a
	// blocking query that kept the old agent's index would then wait
	// for a change that the new agent's registrations never reach.
	churn := func(t *testing.T) {
		t.Helper()
		c := r.agent.Client()
		for i := range 40 {
			if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "web-1", Name: "web", Address: "10.0.0.1",
				Port: 80, Meta: map[string]string{"rev": strconv.Itoa(i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("agent killed, then back empty", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		churn(t)
		w.guard()
		win := b.openWindow(t, p)
		r.agent.Kill()
		r.during(t, win, "Consul agent killed")
		r.agent.RestartEmpty()
		back(t)
		w.release()
	})

	t.Run("agent stopped, then started again", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		churn(t)
		w.guard()
		win := b.openWindow(t, p)
		r.agent.Stop()
		r.during(t, win, "Consul agent stopped (SIGINT)")
		r.agent.Restart()
		back(t)
		w.release()
	})

	t.Run("agent frozen, then resumed", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		w.guard()
		mark := b.logMark()
		win := b.openWindow(t, p)
		r.agent.Freeze()
		r.during(t, win, "Consul agent frozen (SIGSTOP)")
		r.agent.Thaw()
		// Nothing changed in the catalog: every service is watched again,
		// and the bridge did not take the freeze for a lost catalog.
		b.waitStatus("consul", "every service watched again", func(s manager.SourceStatus) bool {
			m := allWatched.FindStringSubmatch(s.Notes["watches"])
			return !s.Stale && m != nil && m[1] == m[2] && m[1] == strconv.Itoa(r.services)
		})
		b.waitLog(mark, "consul reads recovered")
		for _, l := range b.lines(mark) {
			if l.Msg == msgConsulReset {
				t.Errorf("a freeze with an unchanged catalog was taken for a reset: %s", l.raw)
			}
		}
		register(t, r.agent.Client(), "db-2", "db", "10.0.2.2", 5432)
		w.wait("db's new instance", func(v view) bool { return len(v["db"]) == 2 })
		w.release()
	})
	b.settled()
}

// holds reports whether v has every endpoint of want.
func holds(v, want view) bool {
	for name, eps := range want {
		for _, ep := range eps {
			if !slices.Contains(v[name], ep) {
				return false
			}
		}
	}
	return true
}

// allWatched matches the source's note on its watches.
var allWatched = regexp.MustCompile(`^(\d+) of (\d+) services watched`)

// msgConsulReset is what the source logs when it finds the agent's
// catalog lost.
const msgConsulReset = "consul lost its state and is filling up again; the removal guard keeps the last good state until the refill settles"

// TestConsulUntrustedCertificate: the agent's HTTPS listener starts
// presenting a certificate of a CA the bridge does not trust (as after a
// CA rotation the bridge was not told about). The bridge fails every
// handshake, and makes no more of them than its backoff allows; when the
// trusted agent answers again, its new registration reaches the watcher.
func TestConsulUntrustedCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "trusted")
	pair := ca.Issue(dir, "agent", "127.0.0.1")
	agent := consultest.Start(t, consultest.WithHTTPS(), consultest.WithHCL(fmt.Sprintf(
		`tls { defaults { ca_file = %q, cert_file = %q, key_file = %q } }`, ca.CertFile, pair.CertFile, pair.KeyFile)))
	p, err := countproxy.HTTP(agent.HTTPSAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	// The impostor: an HTTPS listener with a certificate for the same
	// address from another CA.
	other := tlstest.NewCA(t, dir, "other")
	bad := other.Issue(dir, "impostor", "127.0.0.1")
	handshakes := startImpostor(t, bad)

	r := &consulRig{agent: agent, proxy: p, services: 3}
	want := registerAll(t, agent.Client())
	r.b = startBridge(t, dir, consulEntry("https://"+p.Addr, fmt.Sprintf("    tls: {ca_file: %s}\n", ca.CertFile)), bridgeOptions{})
	r.w = startWatcher(t, r.b.xds)
	r.w.waitHolds("the agent's services", want)
	r.b.baseline()

	r.w.guard()
	win := r.b.openWindow(t, p)
	before := handshakes.Load()
	p.SetUpstream(handshakes.addr)
	p.Cut()
	r.during(t, win, "untrusted certificate")
	t.Logf("the impostor saw %d handshakes", handshakes.Load()-before)
	if s := r.b.status("consul"); !regexp.MustCompile(`certificate|x509|tls`).MatchString(s.LastError) {
		t.Errorf("/sources does not say the certificate is the problem: %q", s.LastError)
	}

	p.SetUpstream(agent.HTTPSAddr)
	register(t, agent.Client(), "api-2", "api", "10.0.1.2", 8080)
	r.w.wait("api's new instance", func(v view) bool { return len(v["api"]) == 2 })
	r.w.release()
	r.b.settled()
}

// impostor counts the TLS handshakes of a listener that presents a
// certificate the bridge does not trust.
type impostor struct {
	atomic.Int64
	addr string
}

func startImpostor(t *testing.T, pair tlstest.Pair) *impostor {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	im := &impostor{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			im.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(patience))
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Read(make([]byte, 1))
			}()
		}
	}()
	return im
}
