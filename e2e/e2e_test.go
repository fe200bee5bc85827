// Package e2e runs the bridge binary as a separate process and checks it
// from the outside: Envoy-like xDS clients (test/envoysim), the admin
// listener, exit codes and logs.
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// patience bounds each wait for the bridge (see bridgetest.Patience). How
// long an edit of services.yaml took to reach the clients is logged; the
// README's "about a second" is a figure of the file source's benchmark, not
// of a test.
const patience = bridgetest.Patience

// diff describes how a client's state differs from services ("" if not).
func diff(s envoysim.State, services []svc) string {
	var want []string
	for _, sv := range services {
		want = append(want, sv.Name)
	}
	slices.Sort(want)
	var clusters []string
	for name := range s.Clusters {
		clusters = append(clusters, name)
	}
	slices.Sort(clusters)
	if !slices.Equal(clusters, want) {
		return fmt.Sprintf("clusters %v, want %v", clusters, want)
	}
	for _, sv := range services {
		cla := s.Assignments[sv.Name]
		if cla == nil {
			return fmt.Sprintf("no assignment for %s", sv.Name)
		}
		if got := endpoints(cla); !slices.Equal(got, sv.want()) {
			return fmt.Sprintf("%s endpoints:\n  got  %q\n  want %q", sv.Name, got, sv.want())
		}
	}
	return ""
}

// waitState waits until c holds exactly services.
func waitState(t *testing.T, c *envoysim.Client, name string, services []svc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := c.WaitFor(ctx, func(s envoysim.State) bool { return diff(s, services) == "" }); err != nil {
		t.Fatalf("%s client: %v; %s", name, err, diff(c.State(), services))
	}
}

// waitClient waits until c's state satisfies cond and returns when.
func waitClient(t *testing.T, c *envoysim.Client, what string, cond func(envoysim.State) bool) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := c.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v\n%s", what, err, c.State().Summary())
	}
	return time.Now()
}

// checkCDSBeforeEDS checks that every cluster's first CDS response came
// before the first EDS response carrying its assignment.
func checkCDSBeforeEDS(t *testing.T, name string, log []envoysim.Received) {
	t.Helper()
	firstCDS, firstEDS := map[string]int{}, map[string]int{}
	for i, r := range log {
		first := map[string]map[string]int{envoysim.ClusterType: firstCDS, envoysim.EndpointType: firstEDS}[r.TypeURL]
		if first == nil {
			continue
		}
		for _, n := range r.Names {
			if _, seen := first[n]; !seen {
				first[n] = i
			}
		}
	}
	for n, eds := range firstEDS {
		cds, ok := firstCDS[n]
		if !ok || cds > eds {
			t.Errorf("%s client: EDS of %q (response %d) arrived before its CDS (response %d, present %t)", name, n, eds, cds, ok)
		}
	}
}

func startClient(t *testing.T, addr string, opts envoysim.Options) *envoysim.Client {
	t.Helper()
	opts.Addr = addr
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := envoysim.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestServeEditAndReject runs one bridge through a file's life: both ADS
// variants get the file's services; edits reach them (how soon is logged); bad
// content is rejected with an error naming file and field while the last
// good state stays served; fixing the file resumes updates.
func TestServeEditAndReject(t *testing.T) {
	dir := t.TempDir()
	cfg, xdsAddr, adminAddr := writeConfig(t, dir)
	services := filepath.Join(dir, "services.yaml")
	state := quickstart()
	writeFile(t, services, render(state))
	p := start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)

	sotw := startClient(t, xdsAddr, envoysim.Options{Node: "sotw-ads"})
	delta := startClient(t, xdsAddr, envoysim.Options{Node: "delta-ads", Delta: true})
	// The per-type services (a CDS and an EDS stream) are served too.
	perType := map[string]*envoysim.Client{
		"sotw per-type":  startClient(t, xdsAddr, envoysim.Options{Node: "sotw-xds", PerType: true}),
		"delta per-type": startClient(t, xdsAddr, envoysim.Options{Node: "delta-xds", PerType: true, Delta: true}),
	}
	waitState(t, sotw, "sotw", state)
	waitState(t, delta, "delta", state)
	for name, c := range perType {
		waitState(t, c, name, state)
	}

	t.Run("grpc chain", func(t *testing.T) {
		g := startClient(t, xdsAddr, envoysim.Options{Node: "grpc", UserAgent: "gRPC Go",
			Clusters: []string{"web"}, Types: []string{envoysim.ListenerType, envoysim.RouteType}})
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		err := g.WaitFor(ctx, func(s envoysim.State) bool {
			return s.Resources[envoysim.ListenerType]["web"] != nil && s.Resources[envoysim.RouteType]["web"] != nil &&
				len(s.Clusters) == 1 && s.Assignments["web"] != nil
		})
		if err != nil {
			t.Fatalf("gRPC client did not get the web chain: %v; %s", err, g.State().Summary())
		}
	})

	// Edit: add an endpoint, change a weight, remove a service, add one.
	state[0].EPs = append(state[0].EPs, ep{Addr: "127.0.0.1", Port: 8083, Weight: 20, Region: "eu-west", Zone: "eu-west-1c"})
	state[1].EPs[0].Weight = 5
	state = append(state[:2:2], svc{Name: "search", EPs: []ep{{Addr: "::1", Port: 9200}}})
	edited := time.Now()
	writeFile(t, services, render(state))
	waitState(t, sotw, "sotw", state)
	waitState(t, delta, "delta", state)
	t.Logf("edit reached both ADS clients in %s", time.Since(edited))
	for name, c := range perType {
		waitState(t, c, name, state)
	}
	if !slices.ContainsFunc(delta.Log(), func(r envoysim.Received) bool {
		return r.TypeURL == envoysim.ClusterType && slices.Contains(r.Removed, "payments")
	}) {
		t.Error("delta client: no CDS response with payments in removed_resources")
	}
	checkCDSBeforeEDS(t, "sotw", sotw.Log())
	checkCDSBeforeEDS(t, "delta", delta.Log())

	// Invalid content: rejected whole, logged with file and field, last
	// good state still served (also to a client connecting now).
	writeFile(t, services, "services:\n  - name: web\n    endpoints:\n      - address: 127.0.0.1\n        port: 70000\n")
	line := p.waitLog(patience, "services.yaml", "services[0].endpoints[0].port")
	if !strings.Contains(line, "level=ERROR") {
		t.Errorf("rejection logged as %q, want level=ERROR", line)
	}
	bridgetest.Eventually(t, patience, "/sources to report the source stale", func() bool {
		_, body := bridgetest.Get("http://" + adminAddr + "/sources")
		return strings.Contains(body, `"stale": true`) && strings.Contains(body, "services[0].endpoints[0].port")
	})
	late := startClient(t, xdsAddr, envoysim.Options{Node: "late-sotw"})
	waitState(t, late, "late", state)
	for name, c := range map[string]*envoysim.Client{"sotw": sotw, "delta": delta} {
		if d := diff(c.State(), state); d != "" {
			t.Errorf("%s client changed after invalid content: %s", name, d)
		}
	}
	if code, _ := bridgetest.Get("http://" + adminAddr + "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d after a rejected file, want 200 (the source synced before)", code)
	}

	// Fixing the file resumes updates.
	state[0].EPs[0].Weight = 40
	fixed := time.Now()
	writeFile(t, services, render(state))
	waitState(t, sotw, "sotw", state)
	waitState(t, delta, "delta", state)
	t.Logf("fix reached both clients in %s", time.Since(fixed))

	// The metrics show the source and the engine.
	_, metrics := bridgetest.Get("http://" + adminAddr + "/metrics")
	for _, want := range []string{`xdsbridge_source_synced{source="static"} 1`, `xdsbridge_source_stale{source="static"} 0`,
		"xdsbridge_xds_clients", "xdsbridge_services 3", "go_goroutines", "process_open_fds"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := bridgetest.Get("http://" + adminAddr + "/clients"); code != http.StatusOK || !strings.Contains(body, "delta-ads") {
		t.Errorf("/clients = %d %.300q, want the delta-ads client listed", code, body)
	}
}

// TestReadiness checks that /readyz is 503 naming the source until
// the services file first loads, then 200.
func TestReadiness(t *testing.T) {
	dir := t.TempDir()
	cfg, xdsAddr, adminAddr := writeConfig(t, dir)
	start(t, cfg)
	bridgetest.Eventually(t, patience, "the admin listener", func() bool {
		code, _ := bridgetest.Get("http://" + adminAddr + "/healthz")
		return code == http.StatusOK
	})
	code, body := bridgetest.Get("http://" + adminAddr + "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "static") {
		t.Fatalf("/readyz without services file = %d %q, want 503 naming static", code, body)
	}
	// A client connecting before readiness gets nothing, rather than an
	// empty set that would wipe its clusters.
	early := startClient(t, xdsAddr, envoysim.Options{Node: "early"})

	state := quickstart()[:1]
	writeFile(t, filepath.Join(dir, "services.yaml"), render(state))
	bridgetest.WaitReady(t, adminAddr, patience)
	waitState(t, early, "early", state)
	for _, r := range early.Log() {
		if r.TypeURL == envoysim.ClusterType && len(r.Names) == 0 {
			t.Errorf("early client got an empty CDS response (version %q) before the source synced", r.Version)
		}
	}
}

// TestQuickstart runs the README's first command (on free ports: the admin
// address from the environment, the xDS one from a flag, both beating the
// file) and checks a client gets the quickstart's three services.
func TestQuickstart(t *testing.T) {
	xdsAddr, adminAddr := freeport.Addr(t), freeport.Addr(t)
	p := startEnv(t, []string{"BRIDGE_ADMIN_LISTEN=" + adminAddr, "BRIDGE_XDS_LISTEN=127.0.0.1:1", "BRIDGE_LOG_FORMAT=json"},
		"run", "--config", filepath.Join("..", "examples", "quickstart", "bridge.yaml"), "--xds-listen", xdsAddr)
	bridgetest.WaitReady(t, adminAddr, patience)
	p.waitLog(patience, `"msg":"serving xDS"`, xdsAddr)
	c := startClient(t, xdsAddr, envoysim.Options{Node: "quickstart"})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	err := c.WaitFor(ctx, func(s envoysim.State) bool {
		return len(s.Clusters) == 3 && s.Assignments["web"] != nil && s.Assignments["api"] != nil && s.Assignments["payments"] != nil
	})
	if err != nil {
		t.Fatalf("quickstart client: %v; %s", err, c.State().Summary())
	}
	if got := len(endpoints(c.State().Assignments["web"])); got != 2 {
		t.Errorf("web has %d endpoints, want the quickstart's 2", got)
	}

	// The quick start names the status page; on this run's port it says
	// what runs and links each service and client to its debug pages.
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	quick, _, _ := strings.Cut(string(readme), "## Running the tests")
	if !strings.Contains(quick, "<http://127.0.0.1:19000/>") {
		t.Error("the README's quick start does not name the status page, http://127.0.0.1:19000/")
	}
	_, page := bridgetest.Get("http://" + adminAddr + "/")
	for _, want := range []string{`id="version">dev<`, filepath.Join("examples", "quickstart", "bridge.yaml") + "</code> loaded",
		`<a href="/debug/why?cluster=payments">`, `<a href="/debug/config_dump?node=quickstart">`} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q", want)
		}
	}
	// Every query the admin API's table (docs/admin.md) gives the page
	// works.
	admin, err := os.ReadFile(filepath.Join("..", "docs", "admin.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, row, _ := strings.Cut(string(admin), "\n| `/` |")
	row, _, _ = strings.Cut(row, "\n")
	for query, want := range map[string]string{
		"?q=TEXT": "?q=pay", "?only=problems": "?only=problems", "?page=N": "?page=1", "?cpage=N": "?cpage=1", "?refresh=off": "?refresh=off",
	} {
		if !strings.Contains(row, "`"+query+"`") {
			t.Errorf("the row of / in docs/admin.md does not document %s", query)
		}
		if code, body := bridgetest.Get("http://" + adminAddr + "/" + want); code != http.StatusOK || !strings.Contains(body, `id="services"`) {
			t.Errorf("/%s = %d, without the services", want, code)
		}
	}
	if _, body := bridgetest.Get("http://" + adminAddr + "/?q=pay"); !strings.Contains(body, ">payments</a>") || strings.Contains(body, ">web</a>") {
		t.Error("/?q=pay does not show payments alone")
	}
}
