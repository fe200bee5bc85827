package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// A reload keeps what it does not change. These tests change a source's
// entry while clients watch, and assert that no client ever lost one of
// the source's services: not while the new instance syncs, not while its
// registry is down, not through a storm of reloads. Only a reload that
// removes a source removes its services.

// removalWatch is an xDS client that checks, after every response, the
// clusters it watches: once it held one with endpoints, losing the cluster
// or its last endpoint is a removal, which it records. That is what would
// have cost an Envoy the traffic to the service.
type removalWatch struct {
	*envoysim.Client
	node  string
	names []string

	mu       sync.Mutex
	held     map[string]bool
	removals []string
}

func watchRemovals(t *testing.T, addr string, opts envoysim.Options, names []string) *removalWatch {
	t.Helper()
	w := &removalWatch{node: opts.Node, names: names, held: map[string]bool{}}
	opts.OnResponse = w.observe
	w.Client = startClient(t, addr, opts)
	return w
}

func (w *removalWatch) observe(c *envoysim.Client, r envoysim.Received) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.names {
		cla, _ := c.Resource(envoysim.EndpointType, n).(*endpointv3.ClusterLoadAssignment)
		ok := c.Resource(envoysim.ClusterType, n) != nil && len(endpoints(cla)) > 0
		switch {
		case ok:
			w.held[n] = true
		case w.held[n]:
			w.held[n] = false
			w.removals = append(w.removals, fmt.Sprintf("%s (by a %s response, version %q)",
				n, r.TypeURL[strings.LastIndex(r.TypeURL, ".")+1:], r.Version))
		}
	}
}

// lost returns the removals recorded so far.
func (w *removalWatch) lost() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.removals...)
}

// serves waits until the client holds every watched cluster with endpoints
// and cond (nil: none) holds too.
func (w *removalWatch) serves(t *testing.T, what string, cond func(envoysim.State) bool) {
	t.Helper()
	waitClient(t, w.Client, what, func(s envoysim.State) bool {
		for _, n := range w.names {
			if s.Clusters[n] == nil || len(endpoints(s.Assignments[n])) == 0 {
				return false
			}
		}
		return cond == nil || cond(s)
	})
}

// noRemovals fails if a watcher recorded a removal.
func noRemovals(t *testing.T, step string, watchers ...*removalWatch) {
	t.Helper()
	for _, w := range watchers {
		if lost := w.lost(); len(lost) > 0 {
			t.Errorf("%s: client %s lost %d services: %v", step, w.node, len(lost), lost)
		}
	}
}

// watchBoth starts a SotW and a delta ADS watcher of names.
func watchBoth(t *testing.T, xdsAddr string, names []string) []*removalWatch {
	t.Helper()
	return []*removalWatch{
		watchRemovals(t, xdsAddr, envoysim.Options{Node: "sotw"}, names),
		watchRemovals(t, xdsAddr, envoysim.Options{Node: "delta", Delta: true}, names),
	}
}

// sentinelFile is a services file of one service, sentinel, at addr.
func sentinelFile(addr string) string {
	return fmt.Sprintf("services:\n  - name: sentinel\n    endpoints: [{address: %s, port: 80}]\n", addr)
}

// flushed moves the sentinel service of the file at path to addr and waits
// until every watcher holds it there. A removal published by the reload
// before it would have reached the watchers by then: the manager publishes
// in order, so this proves that the watchers saw everything the reload
// published without waiting for a guessed time.
func flushed(t *testing.T, path, addr string, watchers []*removalWatch) {
	t.Helper()
	writeFile(t, path, sentinelFile(addr))
	for _, w := range watchers {
		waitClient(t, w.Client, "the sentinel at "+addr, func(s envoysim.State) bool {
			ep := endpoints(s.Assignments["sentinel"])
			return len(ep) == 1 && strings.HasPrefix(ep[0], addr+":80")
		})
	}
}

// reloadable is a bridge run from a configuration file that a test
// rewrites and reloads (SIGHUP). The file lists its sources, usually with
// sentinelSource among them: the services file at sentinel, which flushed
// rewrites.
type reloadable struct {
	*process
	cfg, sentinel      string
	xdsAddr, adminAddr string
}

// sentinelSource is the entry of the file source serving the sentinel.
const sentinelSource = "  - {name: files, type: file, path: sentinel.yaml}\n"

// startReloadable starts a bridge on a configuration of sources (the
// entries of its sources list, as YAML) with the sentinel at 10.9.0.1,
// and waits until it is ready.
func startReloadable(t *testing.T, sources string) *reloadable {
	t.Helper()
	dir := t.TempDir()
	b := &reloadable{cfg: filepath.Join(dir, "bridge.yaml"), sentinel: filepath.Join(dir, "sentinel.yaml"),
		xdsAddr: freeport.Addr(t), adminAddr: freeport.Addr(t)}
	writeFile(t, b.sentinel, sentinelFile("10.9.0.1"))
	b.configure(t, sources)
	b.process = start(t, b.cfg)
	bridgetest.WaitReady(t, b.adminAddr, patience)
	return b
}

// configure writes the configuration of sources.
func (b *reloadable) configure(t *testing.T, sources string) {
	t.Helper()
	writeFile(t, b.cfg, fmt.Sprintf("xds: {listen: %s}\nadmin: {listen: %s}\nsources:\n%s", b.xdsAddr, b.adminAddr, sources))
}

// reload writes the configuration of sources and signals the bridge to
// reload it.
func (b *reloadable) reload(t *testing.T, sources string) {
	t.Helper()
	b.configure(t, sources)
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// waitPhase waits until /sources shows the source in phase (and cond,
// when not nil, holds for its status).
func waitPhase(t *testing.T, adminAddr, name, phase string) {
	t.Helper()
	bridgetest.Eventually(t, patience, fmt.Sprintf("%s in phase %s", name, phase), func() bool {
		return bridgetest.SourceStatus(t, adminAddr, name).Startup == phase
	})
}

// TestReloadChangedDNSSourceWhileItsServerIsDown changes the query timeout
// of a DNS source whose server is down: the new instance cannot sync, so
// the previous one serves; at the startup timeout (counted from the
// reload) the previous one stops, its services stay and /sources shows the
// new instance's error; once DNS is back the new instance takes over. No
// client loses a service at any point.
func TestReloadChangedDNSSourceWhileItsServerIsDown(t *testing.T) {
	hosts := []string{"a", "b", "c", "d", "e", "f"}
	var zone, entries strings.Builder
	names := make([]string, len(hosts))
	for i, h := range hosts {
		fmt.Fprintf(&zone, "%s IN A 10.0.1.%d\n", h, i+1)
		names[i] = "legacy-" + h
		fmt.Fprintf(&entries, "      - {cluster: %s, host: %s.example.org, port: 80}\n", names[i], h)
	}
	dns := dnstest.Start(t, "example.org.", zone.String())
	legacy := func(timeout string) string {
		return fmt.Sprintf(`  - name: legacy
    type: dns
    servers: [%s]
    timeout: %s
    attempts: 1
    refresh: {min: 1s, max: 2s}
    startup: {timeout: 2s}
    services:
%s`, dns.Addr, timeout, entries.String()) + sentinelSource
	}
	b := startReloadable(t, legacy("1s"))
	watchers := watchBoth(t, b.xdsAddr, names)
	for _, w := range watchers {
		w.serves(t, "the DNS services", nil)
	}

	dns.Stop()
	b.reload(t, legacy("2s"))
	b.waitLog(patience, "configuration reloaded", "started=legacy")
	bridgetest.Eventually(t, patience, "the new instance's startup timeout to end, its error shown", func() bool {
		s := bridgetest.SourceStatus(t, b.adminAddr, "legacy")
		return s.Startup == "timed_out" && s.Stale && s.LastError != ""
	})
	flushed(t, b.sentinel, "10.9.0.2", watchers)
	noRemovals(t, "DNS down, the changed source past its startup timeout", watchers...)
	for _, w := range watchers {
		w.serves(t, "the DNS services, kept", nil)
	}

	dns.Restart()
	bridgetest.Eventually(t, patience, "the new instance to sync once DNS is back", func() bool {
		s := bridgetest.SourceStatus(t, b.adminAddr, "legacy")
		return s.Startup == "synced" && !s.Stale
	})
	flushed(t, b.sentinel, "10.9.0.3", watchers)
	noRemovals(t, "DNS back", watchers...)
}

// registerMany registers n services svc-00... with one instance each and
// returns their names.
func registerMany(t *testing.T, agent *consultest.Agent, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("svc-%02d", i)
		if err := agent.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
			ID: names[i] + "-1", Name: names[i], Address: fmt.Sprintf("10.1.%d.1", i), Port: 8080}); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// moveService re-registers svc-00's instance at 10.1.99.1 and waits until
// every watcher holds it there, after step.
func moveService(t *testing.T, agent *consultest.Agent, step string, watchers []*removalWatch) {
	t.Helper()
	if err := agent.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: "svc-00-1", Name: "svc-00", Address: "10.1.99.1", Port: 8080}); err != nil {
		t.Fatal(err)
	}
	for _, w := range watchers {
		w.serves(t, "svc-00 moved "+step, func(s envoysim.State) bool {
			ep := endpoints(s.Assignments["svc-00"])
			return len(ep) == 1 && strings.HasPrefix(ep[0], "10.1.99.1:8080")
		})
	}
}

// TestReloadChangedConsulSource changes max_stale of a healthy Consul
// source while the agent is slow to answer the new instance's first reads:
// the previous instance keeps serving (an instance moved meanwhile reaches
// the clients) until the new one has synced, then stops (its watches are
// cut). No client loses a service. A reload that then removes a source
// does remove that source's services, and only those.
func TestReloadChangedConsulSource(t *testing.T) {
	agent := consultest.Start(t)
	names := registerMany(t, agent, 30)
	gate := countConsul(t, agent.HTTPAddr)
	consul := func(maxStale string) string {
		return fmt.Sprintf(`  - name: consul
    type: consul
    address: %s
    max_stale: %s
    services: {exclude: [consul]}
`, gate.addr, maxStale)
	}
	b := startReloadable(t, consul("5s")+sentinelSource)
	watchers := watchBoth(t, b.xdsAddr, names)
	for _, w := range watchers {
		w.serves(t, "the Consul services", nil)
	}
	bridgetest.Eventually(t, patience, "the watches of every service", func() bool { return gate.watching.Load() == int64(len(names)) })
	cut := gate.cut.Load()

	gate.hold()
	b.reload(t, consul("10s")+sentinelSource)
	b.waitLog(patience, "configuration reloaded", "started=consul")
	bridgetest.Eventually(t, patience, "the new instance's first read, held", func() bool { return gate.held.Load() > 0 })
	if s := bridgetest.SourceStatus(t, b.adminAddr, "consul"); s.Startup != "replacing" {
		t.Errorf("consul is %q in /sources while its new instance cannot sync, want replacing", s.Startup)
	}
	flushed(t, b.sentinel, "10.9.0.2", watchers)
	noRemovals(t, "the new Consul instance syncing", watchers...)
	// The previous instance's watches still report: an instance moved
	// reaches the clients.
	moveService(t, agent, "while the new instance syncs", watchers)
	if c := gate.cut.Load(); c != cut {
		t.Errorf("%d watches cut before the new instance synced, want none", c-cut)
	}

	gate.release()
	waitPhase(t, b.adminAddr, "consul", "synced")
	bridgetest.Eventually(t, patience, "the previous instance's watches to be cut", func() bool { return gate.cut.Load() > cut })
	flushed(t, b.sentinel, "10.9.0.3", watchers)
	noRemovals(t, "the new Consul instance synced", watchers...)

	// Removing the file source is the point of this reload: its service
	// goes, the unchanged Consul source's stay.
	b.reload(t, consul("10s"))
	for _, w := range watchers {
		waitClient(t, w.Client, "the sentinel removed", func(s envoysim.State) bool { return s.Clusters["sentinel"] == nil })
		w.serves(t, "the Consul services after the file source was removed", nil)
	}
	noRemovals(t, "a source removed", watchers...)
}

// TestReloadStorm reloads a running bridge 1,000 times, alternating two
// valid files that differ in one key of a Consul source and one of a DNS
// source: every client keeps every service through the storm, and after
// it the last configuration's instances serve.
func TestReloadStorm(t *testing.T) {
	agent := consultest.Start(t)
	consulNames := registerMany(t, agent, 10)
	dns := dnstest.Start(t, "example.org.", "a IN A 10.0.1.1\nb IN A 10.0.1.2\nc IN A 10.0.1.3\n")
	dir := t.TempDir()
	variant := func(maxStale, timeout string) string {
		return fmt.Sprintf(`
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
sources:
  - name: consul
    type: consul
    address: %s
    max_stale: %s
    services: {exclude: [consul]}
  - name: legacy
    type: dns
    servers: [%s]
    timeout: %s
    services:
      - {cluster: legacy-a, host: a.example.org, port: 80}
      - {cluster: legacy-b, host: b.example.org, port: 80}
      - {cluster: legacy-c, host: c.example.org, port: 80}
`, agent.HTTPAddr, maxStale, dns.Addr, timeout)
	}
	files := []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")}
	writeFile(t, files[0], variant("5s", "1s"))
	writeFile(t, files[1], variant("10s", "2s"))
	logs := &bridgetest.LogBuffer{}
	in := bridgetest.StartIn(t, dir, variant("5s", "1s"), logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bridge log (end):\n%s", tail(logs.String(), 8000))
		}
	})
	adminAddr := in.AdminAddr().String()
	bridgetest.WaitReady(t, adminAddr, patience)
	names := append(consulNames, "legacy-a", "legacy-b", "legacy-c")
	watchers := watchBoth(t, in.XDSAddr().String(), names)
	for _, w := range watchers {
		w.serves(t, "every service", nil)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*patience)
	defer cancel()
	for i := range 1000 {
		path := files[i%2]
		if _, err := in.Reload(ctx, func() (*config.Config, error) { return config.Load(path, nil) }); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	// The storm ended on b.yaml: its instances take over.
	waitPhase(t, adminAddr, "consul", "synced")
	waitPhase(t, adminAddr, "legacy", "synced")
	moveService(t, agent, "after the storm", watchers)
	noRemovals(t, "1,000 reloads", watchers...)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
