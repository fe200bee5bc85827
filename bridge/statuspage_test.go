package bridge_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the status page screenshot to docs/status-page.png")

// staticBridge runs a bridge with one file source, static, of the
// settings given (flow style, such as "path: services.yaml"), its config
// file in dir, and waits until it is ready.
func staticBridge(t *testing.T, dir, settings string) *bridge.Instance {
	t.Helper()
	in := bridgetest.StartIn(t, dir, "xds: {listen: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nsources:\n"+
		"  - {name: static, type: file, "+settings+"}\n", io.Discard)
	// Generous: 10,000 services under the race detector on a busy machine.
	bridgetest.WaitReady(t, in.AdminAddr().String(), 3*time.Minute)
	return in
}

// rejectAssignments makes a simulated client NACK every assignment.
func rejectAssignments(typeURL string, _ []*anypb.Any) error {
	if strings.HasSuffix(typeURL, "ClusterLoadAssignment") {
		return errors.New("endpoint weight out of range")
	}
	return nil
}

// headless runs Chromium headless with args and returns its stdout.
func headless(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// TestStatusPageInChromium renders the status page of a running bridge,
// with a stale source, a service without healthy endpoints and clients of
// which one NACKs, in headless Chromium and checks what the browser
// shows; -update-screenshot refreshes docs/status-page.png.
func TestStatusPageInChromium(t *testing.T) {
	bin := bridgetest.Chromium(t)
	dir := t.TempDir()
	services := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(services, []byte(`services:
  - name: web
    endpoints:
      - {address: 10.0.0.1, port: 8080, locality: {zone: eu-1a}}
      - {address: 10.0.0.2, port: 8080, locality: {zone: eu-1b}}
      - {address: 10.0.0.3, port: 8080, priority: 1, health: draining}
  - name: payments
    endpoints:
      - {address: 10.0.1.1, port: 9090, health: unhealthy}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	in := staticBridge(t, dir, "path: services.yaml, poll_interval: 100ms")
	admin := in.AdminAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, opts := range []envoysim.Options{
		{Node: "envoy-eu-1", Delta: true},
		{Node: "envoy-eu-2", Reject: rejectAssignments},
	} {
		opts.Addr = in.XDSAddr().String()
		c, err := envoysim.Start(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if err := c.WaitFor(ctx, func(s envoysim.State) bool { return len(s.Clusters) == 2 }); err != nil {
			t.Fatal(err)
		}
	}
	// A broken file makes the source stale; the last good state stays.
	if err := os.WriteFile(services, []byte("services: [{name: web, endpoints: [{address: nowhere, port: 0}]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bridgetest.Eventually(t, bridgetest.Patience, "the source to go stale", func() bool {
		_, body := bridgetest.Get("http://" + admin + "/sources")
		return strings.Contains(body, `"stale": true`)
	})
	bridgetest.Eventually(t, bridgetest.Patience, "the NACK to be recorded", func() bool {
		_, body := bridgetest.Get("http://" + admin + "/clients")
		return strings.Contains(body, "endpoint weight out of range")
	})

	// One browser run both prints the DOM and takes the screenshot:
	// starting Chromium is most of this test's time.
	shot := filepath.Join(dir, "status-page.png")
	dom := headless(t, bin, "--hide-scrollbars", "--window-size=1280,860", "--screenshot="+shot, "--dump-dom", "http://"+admin+"/")
	for _, want := range []string{
		`id="readiness">ready`, `<td>static</td>`, `class="bad">stale`,
		`>web</a></td><td class="n">3</td>`, `<a href="/debug/why?cluster=payments">payments</a>`, `class="bad">0`,
		`envoy-eu-1`, `delta_ads`, `envoy-eu-2`, `sotw_ads`, `endpoint weight out of range`,
		`id="version">` + bridgetest.Version + `<`, filepath.Join(dir, "bridge.yaml") + "</code> loaded",
		`<a href="/debug/config_dump?node=envoy-eu-1">envoy-eu-1</a>`,
		`Clients NACKing (1)`, `Services without healthy endpoints (1)`, `<span class="bad">1 stale</span>`,
		`<span class="bad">1 NACKing</span>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page Chromium rendered lacks %q:\n%s", want, dom)
		}
	}
	st, err := os.Stat(shot)
	if err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot: %v (%v)", err, st)
	}
	if *updateScreenshot {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "status-page.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusPageInChromiumAtScale renders the page of a bridge serving
// 10,000 services, some without (healthy) endpoints, to 100 clients, one
// in ten NACKing, in headless Chromium: the summary and the problems come
// first, and the long tables show one page, so that the document stays
// small whatever the number of services. (The full 1,000 clients are
// measured by xdsload status-page.)
func TestStatusPageInChromiumAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 services and 100 clients")
	}
	const services, clients = 10_000, 100
	bin := bridgetest.Chromium(t)
	dir := t.TempDir()
	var file strings.Builder
	file.WriteString("services:\n")
	for i := range services {
		health := "healthy"
		if i%100 == 1 {
			health = "unhealthy"
		}
		fmt.Fprintf(&file, "  - {name: svc-%05d, endpoints: [{address: 10.0.%d.%d, port: 8080, health: %s}]}\n", i, i>>8, i&0xff, health)
	}
	path := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	in := staticBridge(t, dir, "path: services.yaml")
	admin := in.AdminAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range clients {
		opts := envoysim.Options{Addr: in.XDSAddr().String(), Node: fmt.Sprintf("envoy-%03d", i), Delta: i%2 == 0, Light: true,
			Clusters: []string{fmt.Sprintf("svc-%05d", i), fmt.Sprintf("svc-%05d", i+5000)}}
		if i%10 == 0 {
			opts.Reject = rejectAssignments
		}
		c, err := envoysim.Start(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
	}
	bridgetest.Eventually(t, 3*time.Minute, "every client current or NACKing", func() bool {
		_, body := bridgetest.Get("http://" + admin + "/")
		return strings.Contains(body, `<th>Clients</th><td class="n">100</td><td>90 current, <span class="bad">10 NACKing</span>`)
	})

	dom := headless(t, bin, "--window-size=1280,860", "--dump-dom", "http://"+admin+"/")
	t.Logf("the rendered document: %d bytes", len(dom))
	if len(dom) > 256<<10 {
		t.Errorf("the rendered document is %d bytes; want it bounded whatever the number of services", len(dom))
	}
	for _, want := range []string{
		`<th>Services</th><td class="n">10,000</td>`, `<span class="bad">100 without healthy endpoints</span>`,
		`Clients NACKing (10)`, `<a href="/debug/config_dump?node=envoy-010">envoy-010</a>`,
		`Services without healthy endpoints (100)`, `<a href="/debug/why?cluster=svc-00101">svc-00101</a>`,
		`(1–100 of 10,000)`, `(1–50 of 100)`, `href="/?page=2#services"`, `href="/?cpage=2#clients"`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page Chromium rendered lacks %q", want)
		}
	}
	if p, tables := strings.Index(dom, "Clients NACKing"), strings.Index(dom, `id="sources"`); p < 0 || p > tables {
		t.Errorf("the problems (at %d) do not come before the tables (at %d)", p, tables)
	}
	if strings.Contains(dom, ">svc-09999<") {
		t.Error("the first page shows the last service")
	}

	// A filter is a query: the services matching it, a page at a time.
	dom = headless(t, bin, "--dump-dom", "http://"+admin+"/?q=svc-09&page=10")
	for _, want := range []string{`(901–1,000 of 1,000 matching, 10,000 in all)`, `>svc-09999</a>`, `value="svc-09"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the filtered page lacks %q", want)
		}
	}
}
