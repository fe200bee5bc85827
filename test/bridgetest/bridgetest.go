// Package bridgetest runs the whole bridge for end-to-end tests, in-process
// (Start) or as another process's neighbour (FreeAddr, Get, Eventually), and
// waits on what it serves.
package bridgetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
	"github.com/xdsbridge/xdsbridge/test/testwait"
)

// Version is the version the bridges of Start and StartIn report.
const Version = "bridgetest"

// Start writes yaml as the bridge's config file in a temporary directory,
// loads it and runs the bridge in-process, its log discarded, until the test
// ends; a cleanup stops it and fails the test if Run returned an error.
// Listen on 127.0.0.1:0 and ask the instance for its addresses.
func Start(t testing.TB, yaml string) *bridge.Instance {
	t.Helper()
	return StartIn(t, t.TempDir(), yaml, io.Discard)
}

// StartIn is Start with the config file written to dir (so that relative
// paths in it name files there) and the log, at debug level, written to
// logw. The bridge reloads that file on request (RequestReload, POST
// /-/reload) as `bridge run` does.
func StartIn(t testing.TB, dir, yaml string, logw io.Writer) *bridge.Instance {
	t.Helper()
	path := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return StartFile(t, path, logw)
}

// StartFile is StartIn with the config file already at path.
func StartFile(t testing.TB, path string, logw io.Writer) *bridge.Instance {
	t.Helper()
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("loading config: %v", err)
	}
	in, err := bridge.New(cfg, slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug})), bridge.Build{Version: Version})
	if err != nil {
		t.Fatal(err)
	}
	in.ReloadFrom(func() (*config.Config, error) { return config.Load(path, nil) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge Run: %v", err)
		}
	})
	return in
}

// Get returns the status and body of a GET, or 0 and the error text if the
// request failed (the listener not being up yet, say).
func Get(url string) (int, string) { return GetAuth(url, "") }

// GetAuth is Get with a bearer token (none if empty). One request is
// bounded by the tests' patience, so that a loaded machine never times out a bridge
// that answers; a listener not up yet refuses at once, so a poll of Get is
// no slower for it.
func GetAuth(url, token string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Patience is how long the end-to-end tests wait for the bridge to do what
// they expect (see testwait.Patience).
const Patience = testwait.Patience

// Eventually polls cond every 10ms until it holds, failing the test when
// timeout passes first (see testwait.Eventually).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, timeout, what, cond)
}

// Chromium returns the path of a Chromium binary, or skips the test: it
// runs only when integration tests are required (CI installs Chromium).
func Chromium(t testing.TB) string {
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

// WaitReady waits until the admin listener at addr answers /readyz with 200.
func WaitReady(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "/readyz to answer 200", func() bool {
		code, _ := Get("http://" + addr + "/readyz")
		return code == http.StatusOK
	})
}

// LogBuffer collects a log written from several goroutines.
type LogBuffer = syncbuf.Buffer

// SourceStatus returns the /sources entry of the named source of the
// bridge whose admin listener is adminAddr.
func SourceStatus(t testing.TB, adminAddr, name string) manager.SourceStatus {
	t.Helper()
	code, body := Get("http://" + adminAddr + "/sources")
	var all []manager.SourceStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &all) != nil {
		t.Fatalf("/sources = %d %q", code, body)
	}
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("/sources has no source %q: %s", name, body)
	return manager.SourceStatus{}
}

// ConfirmRemovals posts the operator's confirmation of the named source's
// removal hold, and fails the test unless the bridge accepts it.
func ConfirmRemovals(t testing.TB, adminAddr, name string) {
	t.Helper()
	resp, err := http.Post("http://"+adminAddr+"/guard/confirm?source="+name, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /guard/confirm?source=%s = %d, want 200", name, resp.StatusCode)
	}
}

// Build builds the package pkg (an import path) into out, with the race
// detector when race is set, so that the programs a test starts under
// -race are checked too.
func Build(out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, pkg)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building %s: %w", pkg, err)
	}
	return nil
}

// RunWithBinary is the body of a TestMain that runs the bridge binary: it
// builds cmd/bridge (see Build) into a temporary directory that every
// user may read (a test may run the bridge as another user), sets *bin to
// its path, runs the tests and removes the directory. It returns the exit
// code for os.Exit.
func RunWithBinary(m *testing.M, race bool, bin *string) int {
	dir, err := os.MkdirTemp("", "xdsbridge-bin")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "bridge")
	if err := Build(*bin, "github.com/xdsbridge/xdsbridge/cmd/bridge", race); err != nil {
		fmt.Fprintln(os.Stderr, "building the bridge:", err)
		return 1
	}
	return m.Run()
}

// Binary builds cmd/bridge into the test's temporary directory (without
// the race detector) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bridge")
	if err := Build(bin, "github.com/xdsbridge/xdsbridge/cmd/bridge", false); err != nil {
		t.Fatal(err)
	}
	return bin
}
