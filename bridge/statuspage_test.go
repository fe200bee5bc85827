package bridge_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/internal/bridgetest"
	"github.com/xdsbridge/xdsbridge/internal/envoysim"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the status page screenshot to docs/status-page.png")

// chromium returns the path of a Chromium binary, or skips the test: it
// runs only when integration tests are required (CI installs Chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("XDSBRIDGE_INTEGRATION") == "required" {
		t.Fatal("XDSBRIDGE_INTEGRATION=required but no chromium on PATH (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH")
	return ""
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
	bin := chromium(t)
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
	in := bridgetest.Start(t, fmt.Sprintf(`
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
sources:
  - {name: static, type: file, path: %s, poll_interval: 100ms}
`, services))
	admin := in.AdminAddr().String()
	bridgetest.WaitReady(t, admin, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, opts := range []envoysim.Options{
		{Node: "envoy-eu-1", Delta: true},
		{Node: "envoy-eu-2", Reject: func(typeURL string, _ []*anypb.Any) error {
			if strings.HasSuffix(typeURL, "ClusterLoadAssignment") {
				return errors.New("endpoint weight out of range")
			}
			return nil
		}},
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
	bridgetest.Eventually(t, 10*time.Second, "the source to go stale", func() bool {
		_, body := bridgetest.Get("http://" + admin + "/sources")
		return strings.Contains(body, `"stale": true`)
	})
	bridgetest.Eventually(t, 10*time.Second, "the NACK to be recorded", func() bool {
		_, body := bridgetest.Get("http://" + admin + "/clients")
		return strings.Contains(body, "endpoint weight out of range")
	})

	// One browser run both prints the DOM and takes the screenshot:
	// starting Chromium is most of this test's time.
	shot := filepath.Join(dir, "status-page.png")
	dom := headless(t, bin, "--hide-scrollbars", "--window-size=1280,860", "--screenshot="+shot, "--dump-dom", "http://"+admin+"/")
	for _, want := range []string{
		`id="readiness">ready`, `<td>static</td>`, `class="bad">stale`,
		`<td>web</td><td class="n">3</td>`, `<td>payments</td>`, `class="bad">0`,
		`envoy-eu-1`, `delta_ads`, `envoy-eu-2`, `sotw_ads`, `endpoint weight out of range`,
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
