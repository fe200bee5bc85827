package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
)

// TestStatusPageAboutAndFailures checks what the status page says of the
// process (version, configuration file, when it was loaded, a rejected
// reload) and that a source's failures count its current failing period
// only, on the page and in /sources, while the metric counts them all.
func TestStatusPageAboutAndFailures(t *testing.T) {
	dir := t.TempDir()
	services := filepath.Join(dir, "services.yaml")
	good := []byte("services: [{name: web, endpoints: [{address: 10.0.0.1, port: 80}]}]\n")
	if err := os.WriteFile(services, good, 0o600); err != nil {
		t.Fatal(err)
	}
	in := staticBridge(t, dir, "path: services.yaml, poll_interval: 50ms")
	admin := "http://" + in.AdminAddr().String()
	page := func() string {
		t.Helper()
		code, body := bridgetest.Get(admin + "/")
		if code != 200 {
			t.Fatalf("/ = %d %s", code, body)
		}
		return body
	}
	path := filepath.Join(dir, "bridge.yaml")
	body := page()
	for _, want := range []string{`id="version">` + bridgetest.Version + `<`, "<code>" + path + "</code> loaded", " · up "} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	// A broken file is re-read every poll, each read a failure.
	if err := os.WriteFile(services, []byte("services: [{name: web, endpoints: [{address: nowhere}]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bridgetest.Eventually(t, bridgetest.Patience, "three failed reads", func() bool { return failures(t, admin).Failures >= 3 })
	if err := os.WriteFile(services, good, 0o600); err != nil {
		t.Fatal(err)
	}
	bridgetest.Eventually(t, bridgetest.Patience, "the source to read again", func() bool { return !failures(t, admin).Stale })
	st := failures(t, admin)
	if st.Failures != 0 || st.FailuresTotal < 3 {
		t.Errorf("/sources after recovery: failures %d, failures_total %d; want 0 and at least 3", st.Failures, st.FailuresTotal)
	}
	_, metrics := bridgetest.Get(admin + "/metrics")
	want := fmt.Sprintf(`xdsbridge_source_failures_total{source="static"} %d`+"\n", st.FailuresTotal)
	if !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q (every failed read)", want)
	}
	if body := page(); !strings.Contains(body, `<td class="n failures">0</td>`) {
		t.Errorf("the page does not show 0 failures for the recovered source")
	}

	// A rejected reload says the file on disk is not what runs; an
	// applied one clears that.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Reload(ctx, func() (*config.Config, error) {
		return nil, errors.New(`sources[0].type: unknown source type "fiel"`)
	}); err == nil {
		t.Fatal("the reload was not rejected")
	}
	if body := page(); !strings.Contains(body, "reload rejected") || !strings.Contains(body, `unknown source type &#34;fiel&#34;`) {
		t.Errorf("the page does not show the rejected reload")
	}
	next := filepath.Join(dir, "next.yaml")
	if err := os.Link(path, next); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Reload(ctx, func() (*config.Config, error) { return config.Load(next, nil) }); err != nil {
		t.Fatal(err)
	}
	if body := page(); strings.Contains(body, "reload rejected") || !strings.Contains(body, "<code>"+next+"</code> loaded") {
		t.Errorf("after a reload of %s applied, the page says:\n%s", next, body)
	}
}

type sourceFailures struct {
	Stale         bool   `json:"stale"`
	Failures      uint64 `json:"failures"`
	FailuresTotal uint64 `json:"failures_total"`
}

// failures reads the status of the only source from /sources.
func failures(t *testing.T, admin string) sourceFailures {
	t.Helper()
	_, body := bridgetest.Get(admin + "/sources")
	var out []sourceFailures
	if err := json.Unmarshal([]byte(body), &out); err != nil || len(out) != 1 {
		t.Fatalf("/sources = %s (%v)", body, err)
	}
	return out[0]
}
