package consul

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// What the source does while a real agent fails: how much it asks of an
// agent that is gone, hung or untrusted, what it logs, what it removes, and
// that it recovers to the agent's state afterwards. Requests are counted at
// the source's transport (every request its HTTP clients start, answered
// or not, and every connection they dial), so that a refused connection
// stays refused. The bounds are upper bounds: a loaded machine asks less
// in a window, never more.

// faultWindow is how long the tests count requests to a failing agent.
const faultWindow = 3 * time.Second

// maxFaultRequests bounds the requests of one faultWindow to a failing
// agent: the probe alone asks, its waits doubling from 200ms to a second
// (at least half of each, with jitter), which is eight probes in 3s.
const maxFaultRequests = 12

// requestCounter counts the requests and the connections of a source.
type requestCounter struct{ requests, dials atomic.Int64 }

func (rc *requestCounter) install(s *Source) {
	s.wrap = func(next http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			rc.requests.Add(1)
			return next.RoundTrip(req)
		})
	}
	s.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		rc.dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// window counts the requests and dials of the next faultWindow, and the
// CPU time the test process spent meanwhile (the source and the test; the
// agent is another process).
func (rc *requestCounter) window(t testing.TB) (requests, dials int64, cpu time.Duration) {
	t.Helper()
	r0, d0, c0, start := rc.requests.Load(), rc.dials.Load(), cpuTime(), time.Now()
	waitFor(t, patience, "the fault window", func() bool { return time.Since(start) >= faultWindow })
	return rc.requests.Load() - r0, rc.dials.Load() - d0, cpuTime() - c0
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// six are the services of these tests, one instance each without checks.
var six = []string{"web", "api", "db", "cache", "queue", "auth"}

func registerSix(t testing.TB, c *api.Client, port int) {
	t.Helper()
	for i, name := range six {
		register(t, c, &api.AgentServiceRegistration{ID: name + "-1", Name: name, Address: "10.0.8.1", Port: port + i})
	}
}

var sixSelected = map[string]any{"include": []any{"web", "api", "db", "cache", "queue", "auth"}}

// watching reports whether the status says that want of total services are
// watched.
func (r *running) watching(want, total int) func() bool {
	return func() bool {
		return strings.Contains(r.status.Snapshot().Notes["watches"], fmt.Sprintf("%d of %d services watched", want, total))
	}
}

// allServed reports whether every one of the six services is served with
// its instance on port+i.
func (r *running) allServed(port int) func() bool {
	return func() bool {
		for i, name := range six {
			if _, ok := r.endpointsOf(name)[uint32(port+i)]; !ok {
				return false
			}
		}
		return true
	}
}

// faultChecks asserts what the source did during a fault that began when
// the status turned stale: few requests, one log line, nothing published.
func faultChecks(t *testing.T, r *running, rc *requestCounter, updates, logged int) {
	t.Helper()
	requests, dials, cpu := rc.window(t)
	t.Logf("in %v of the fault: %d requests, %d connections dialled, %v of CPU", faultWindow, requests, dials, cpu.Round(time.Millisecond))
	if requests > maxFaultRequests {
		t.Errorf("%d requests to the failing agent in %v, want at most %d", requests, faultWindow, maxFaultRequests)
	}
	if dials > maxFaultRequests {
		t.Errorf("%d connections dialled to the failing agent in %v, want at most %d", dials, faultWindow, maxFaultRequests)
	}
	if got := r.logs.records(slog.LevelInfo) - logged; got != 1 {
		t.Errorf("%d log lines since the fault began, want 1 (the failure's start): %q", got, r.logs.since(slog.LevelInfo, logged))
	}
	if got := r.updateCount(); got != updates {
		t.Errorf("%d updates published during the fault", got-updates)
	}
}

// TestAgentGone: an agent killed, or stopped cleanly, while the source
// reads it is asked a few times a second at most (the probe, backing off),
// logged once; when it comes back the source resyncs, watches every
// service again and logs the recovery once.
func TestAgentGone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*consultest.Agent)
	}{
		{"killed", (*consultest.Agent).Kill},
		{"stopped", (*consultest.Agent).Stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := consultest.Start(t)
			registerSix(t, agent.Client(), 7000)
			var rc requestCounter
			r := startSource(t, agent, map[string]any{"services": sixSelected, "retry_max": "30s"}, rc.install)
			r.synced(patience)
			r.waitFor(patience, "every service served and watched", func() bool { return r.allServed(7000)() && r.watching(6, 6)() })
			updates, logged := r.updateCount(), r.logs.records(slog.LevelInfo)

			tc.fault(agent)
			r.waitFor(patience, "stale", func() bool { return r.status.Snapshot().Stale })
			faultChecks(t, r, &rc, updates, logged)

			agent.Restart()
			r.waitFor(patience, "fresh again, every service watched", func() bool {
				return !r.status.Snapshot().Stale && r.allServed(7000)() && r.watching(6, 6)()
			})
			if got := r.logs.count(msgRecovered); got != 1 {
				t.Errorf("logged %q %d times, want once", msgRecovered, got)
			}
		})
	}
}

// TestAgentUntrusted: the agent comes back presenting a certificate of
// another CA. Every handshake fails; the source asks a few times a second
// at most and logs once. Once the agent presents a trusted certificate
// again (reloaded), the source recovers.
func TestAgentUntrusted(t *testing.T) {
	dir := t.TempDir()
	trusted, other := tlstest.NewCA(t, dir, "trusted"), tlstest.NewCA(t, dir, "other")
	cert := trusted.Issue(dir, "agent", "127.0.0.1", "localhost")
	agent := consultest.Start(t, consultest.WithHTTPS(), consultest.WithHCL(fmt.Sprintf(`
tls {
  defaults {
    cert_file = %q
    key_file = %q
  }
}`, cert.CertFile, cert.KeyFile)))
	registerSix(t, agent.Client(), 7100)
	var rc requestCounter
	r := startSource(t, agent, map[string]any{"services": sixSelected, "retry_max": "30s", "address": agent.HTTPSAddr,
		"scheme": "https", "tls": map[string]any{"ca_file": trusted.CertFile}}, rc.install)
	r.synced(patience)
	r.waitFor(patience, "every service served and watched", func() bool { return r.allServed(7100)() && r.watching(6, 6)() })
	updates, logged := r.updateCount(), r.logs.records(slog.LevelInfo)

	agent.Stop()
	other.Issue(dir, "agent", "127.0.0.1", "localhost")
	agent.Restart()
	r.waitFor(patience, "failing the handshake", func() bool {
		s := r.status.Snapshot()
		return s.Stale && strings.Contains(s.LastError, "certificate")
	})
	faultChecks(t, r, &rc, updates, logged)

	trusted.Issue(dir, "agent", "127.0.0.1", "localhost")
	agent.Reload()
	r.waitFor(patience, "fresh again, every service watched", func() bool {
		return !r.status.Snapshot().Stale && r.allServed(7100)() && r.watching(6, 6)()
	})
}

// censusTaken reports whether the source has taken a census of the
// catalog (the status then says so): the tests of faults start from there,
// as a source that has run for a while does.
func (r *running) censusTaken() bool {
	return strings.Contains(r.status.Snapshot().Notes["watches"], "censuses")
}

// TestAgentRestarted: the agent is killed and comes back with its catalog
// lost, either without its data (a new node ID) or on its data directory
// (a -dev agent: the same node ID, its registrations restored from disk
// into an empty catalog). The source notices the reset, and an instance
// registered on the new agent reaches the served state: no query stays
// blocked on an index of the old agent, and every service is watched
// again.
func TestAgentRestarted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart func(*consultest.Agent)
	}{
		{"empty", (*consultest.Agent).RestartEmpty},
		{"same data", (*consultest.Agent).Restart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := consultest.Start(t)
			registerSix(t, agent.Client(), 7200)
			r := startSource(t, agent, map[string]any{"services": sixSelected, "retry_max": "30s"})
			r.synced(patience)
			r.waitFor(patience, "every service served and watched, a census taken", func() bool {
				return r.allServed(7200)() && r.watching(6, 6)() && r.censusTaken()
			})
			updates := r.updateCount()

			agent.Kill()
			r.waitFor(patience, "stale", func() bool { return r.status.Snapshot().Stale })
			tc.restart(agent)
			r.waitFor(patience, "the reset noted", func() bool { return r.resets() == 1 })
			// The refill: every service registered again, on other ports.
			registerSix(t, agent.Client(), 7300)
			took := r.waitFor(patience, "the services of the new agent served", func() bool {
				for i, name := range six {
					if eps := r.endpointsOf(name); len(eps) != 1 || eps[uint32(7300+i)].Port == 0 {
						return false
					}
				}
				return !r.status.Snapshot().Stale
			})
			t.Logf("the new agent's services served %v after they were registered", took.Round(time.Millisecond))
			if kinds := r.kindsSince(updates); len(kinds) == 0 || kinds[0] != (updateKind{full: true, reset: true}) {
				t.Errorf("updates after the restart = %+v, want the first Full and marked Reset", kinds)
			}
			r.waitFor(patience, "every service watched on the new agent", r.watching(6, 6))
			// A change only a watch sees (no bulk query names it).
			register(t, agent.Client(), &api.AgentServiceRegistration{ID: "web-2", Name: "web", Address: "10.0.8.2", Port: 7399})
			r.waitFor(patience, "a second instance of web served", func() bool { return len(r.endpointsOf("web")) == 2 })
		})
	}
}

// TestServerRestartedEmpty: the topology users run, the source reading a
// client agent; the server is killed and comes back without its data. The
// client agent answered throughout (without a leader meanwhile). The
// source notices the reset, and what is registered after the restart
// reaches the served state: no query stays blocked on an index of the old
// server, and every service is watched again.
func TestServerRestartedEmpty(t *testing.T) {
	server, client := consultest.StartCluster(t)
	registerSix(t, client.Client(), 7600)
	r := startSource(t, client, map[string]any{"services": sixSelected, "retry_max": "30s"})
	r.synced(patience)
	r.waitFor(patience, "every service served and watched, a census taken", func() bool {
		return r.allServed(7600)() && r.watching(6, 6)() && r.censusTaken()
	})
	server.Kill()
	r.waitFor(patience, "stale", func() bool { return r.status.Snapshot().Stale })
	server.RestartEmpty()
	r.waitFor(patience, "the reset noted", func() bool { return r.resets() == 1 })
	// The client agent syncs what changes on it to the new server at once
	// (the rest waits for its next full sync, up to minutes).
	registerSix(t, client.Client(), 7700)
	took := r.waitFor(patience, "the services registered after the restart served", r.allServed(7700))
	t.Logf("served %v after they were registered", took.Round(time.Millisecond))
	r.waitFor(patience, "fresh again, every service watched", func() bool {
		return !r.status.Snapshot().Stale && r.watching(6, 6)()
	})
}

// TestAgentFrozen: the agent hangs (SIGSTOP) with its catalog unchanged,
// then resumes. The source turns stale, asks a few times a second at most,
// removes nothing and reports no reset (the same agent with the same
// state); once the agent answers again every service is watched again, and
// a change no bulk query sees (a second instance without checks) reaches
// the served state through its watch.
func TestAgentFrozen(t *testing.T) {
	agent := consultest.Start(t)
	registerSix(t, agent.Client(), 7400)
	var rc requestCounter
	r := startSource(t, agent, map[string]any{"services": sixSelected, "retry_max": "30s", "read_timeout": "1s"}, rc.install)
	r.synced(patience)
	r.waitFor(patience, "every service served and watched, a census taken", func() bool {
		return r.allServed(7400)() && r.watching(6, 6)() && r.censusTaken()
	})
	updates, logged := r.updateCount(), r.logs.records(slog.LevelInfo)

	agent.Freeze()
	r.waitFor(patience, "stale", func() bool { return r.status.Snapshot().Stale })
	faultChecks(t, r, &rc, updates, logged)

	agent.Thaw()
	r.waitFor(patience, "fresh again, every service watched", func() bool {
		return !r.status.Snapshot().Stale && r.watching(6, 6)()
	})
	if got := r.resets(); got != 0 {
		t.Errorf("%d updates marked Reset after a freeze of an unchanged catalog, want none", got)
	}
	if got := r.removals(); got != 0 {
		t.Errorf("%d services removed or emptied after a freeze of an unchanged catalog", got)
	}
	register(t, agent.Client(), &api.AgentServiceRegistration{ID: "web-2", Name: "web", Address: "10.0.8.2", Port: 7499})
	r.waitFor(patience, "a second instance of web served", func() bool { return len(r.endpointsOf("web")) == 2 })
}

// TestPlanAfterToken: a source started with a token that may not read the
// agent's configuration cannot know the agent's connection limit and
// plans for few connections; once token_file holds a token that may, the
// plan follows the agent's limit and every service is watched.
func TestPlanAfterToken(t *testing.T) {
	agent, mc := aclAgent(t)
	catalogOnly := aclToken(t, mc, "catalog", readRules)
	withAgent := aclToken(t, mc, "catalog-and-agent", readRules+`agent_prefix "" { policy = "read" }`)
	registerSix(t, mc, 7500)
	path := filepath.Join(t.TempDir(), "token")
	writeToken := func(v string) {
		if err := os.WriteFile(path+".tmp", []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	writeToken(catalogOnly)
	r := startSource(t, agent, map[string]any{"services": sixSelected, "token_file": path})
	r.synced(patience)
	r.waitFor(patience, "four of six services watched (the agent's limit unknown)", func() bool {
		return r.allServed(7500)() && r.watching(4, 6)()
	})
	writeToken(withAgent)
	r.waitFor(patience, "every service watched once the agent's limit is known", r.watching(6, 6))
	if got := r.logs.count(msgPlan); got != 2 {
		t.Errorf("logged the connection plan %d times, want twice (at startup, and once the agent's limit was known)", got)
	}
}
