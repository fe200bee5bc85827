// Package istiodtest runs istio's own discovery server for end-to-end
// tests: the program of the tools/istiod module, which assembles istiod's
// config-source client (istio's pkg/adsc), its ServiceEntry registry, push
// context, xDS server and debug handlers from istio's packages, with only
// the Kubernetes API faked (see tools/istiod). It reads an MCP server the
// way istiod reads a `configSources: xds://` entry, serves xDS on a
// loopback port once that source has synced, as istiod does, and istiod's
// debug endpoints (/debug/configz, /debug/registryz, ...) on another.
//
// The binary is found by Binary: $XDSBRIDGE_ISTIOD, else the cache that
// scripts/tools.sh fills, under a name that carries a hash of the tools
// module's sources. Without one the test is skipped, or fails when
// XDSBRIDGE_INTEGRATION=required.
package istiodtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
)

// Binary returns the path of the istiod program, or skips (fails, when
// XDSBRIDGE_INTEGRATION=required) the test when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("XDSBRIDGE_ISTIOD"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		missing(t, fmt.Sprintf("XDSBRIDGE_ISTIOD=%s does not exist", p))
	}
	name, err := CachedName()
	if err != nil {
		missing(t, err.Error())
	}
	p := filepath.Join(cacheDir(), "bin", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	missing(t, "no istiod build (set XDSBRIDGE_ISTIOD or run scripts/tools.sh, which builds tools/istiod: about 15 minutes cold)")
	return ""
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("XDSBRIDGE_INTEGRATION") == "required" {
		t.Fatal(why)
	}
	t.Skip(why)
}

func cacheDir() string {
	if c := os.Getenv("XDSBRIDGE_CACHE"); c != "" {
		return c
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "xdsbridge")
}

// CachedName is the file name scripts/tools.sh caches the build under:
// xdsbridge-istiod-<the first 12 hex digits of the SHA-256 of the tools
// module's go.mod, go.sum and .go files, in that order, the .go files by
// name>, so that a change of the program is a new build.
func CachedName() (string, error) {
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("locating tools/istiod: no caller information")
	}
	dir := filepath.Join(filepath.Dir(here), "..", "..", "tools", "istiod")
	gos, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	slices.Sort(gos)
	h := sha256.New()
	for _, f := range append([]string{filepath.Join(dir, "go.mod"), filepath.Join(dir, "go.sum")}, gos...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("hashing the istiod tools module: %w", err)
		}
		h.Write(b)
	}
	return "xdsbridge-istiod-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// Istiod is a running (or stopped) istiod reading one MCP server.
type Istiod struct {
	// XDSAddr is its plain-text xDS address, HTTPAddr that of its debug
	// and readiness endpoints; both loopback, the same across restarts.
	XDSAddr, HTTPAddr string
	// Source is the MCP server's host:port.
	Source string

	t   testing.TB
	bin string
	log *syncbuf.Buffer // every run's stderr, one after the other

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error // of the last run's Wait, once done is closed
}

// Start runs istiod with source (host:port of the MCP server) as its one
// config source, and returns without waiting for it: istiod opens its xDS
// port only once the source has synced (WaitReady). It is stopped when
// the test ends, and its log printed if the test failed.
func Start(t testing.TB, source string) *Istiod {
	t.Helper()
	i := &Istiod{
		XDSAddr: freeport.Addr(t), HTTPAddr: freeport.Addr(t), Source: source,
		t: t, bin: Binary(t), log: &syncbuf.Buffer{},
	}
	t.Cleanup(func() {
		i.Stop()
		if t.Failed() {
			t.Logf("istiod log:\n%s", tail(i.Log(), 64<<10))
		}
	})
	i.start()
	return i
}

func (i *Istiod) start() {
	i.t.Helper()
	cmd := exec.Command(i.bin, "-config-source", "xds://"+i.Source, "-grpc-addr", i.XDSAddr, "-http-addr", i.HTTPAddr)
	cmd.Stdout, cmd.Stderr = i.log, i.log
	childproc.Tie(cmd)
	if err := cmd.Start(); err != nil {
		i.t.Fatalf("starting istiod: %v", err)
	}
	done := make(chan struct{})
	i.mu.Lock()
	i.cmd, i.done = cmd, done
	i.mu.Unlock()
	go func() {
		err := cmd.Wait()
		i.mu.Lock()
		i.err = err
		i.mu.Unlock()
		close(done)
	}()
}

// Restart starts a stopped (or exited) istiod again on the same ports.
func (i *Istiod) Restart() {
	i.t.Helper()
	i.Stop()
	i.start()
}

// Stop ends istiod (SIGTERM, then SIGKILL after 15 s) and waits for it.
// Stopping a stopped istiod does nothing.
func (i *Istiod) Stop() {
	i.mu.Lock()
	cmd, done := i.cmd, i.done
	i.cmd = nil
	i.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// WaitExit waits up to timeout for istiod to end by itself and returns
// its exit error (nil for status 0); the test fails if it is still running.
func (i *Istiod) WaitExit(timeout time.Duration) error {
	i.t.Helper()
	i.mu.Lock()
	done := i.done
	i.mu.Unlock()
	select {
	case <-done:
	case <-time.After(timeout):
		i.t.Fatalf("istiod still runs after %v", timeout)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.cmd = nil
	return i.err
}

// Running reports whether the process runs.
func (i *Istiod) Running() bool {
	i.mu.Lock()
	done := i.done
	i.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return done != nil
	}
}

// Log is what istiod logged so far, over every run.
func (i *Istiod) Log() string { return i.log.String() }

// Ready reports whether istiod's xDS server is up: its config source
// synced and the push context built.
func (i *Istiod) Ready() bool {
	code, _ := bridgetest.Get("http://" + i.HTTPAddr + "/ready")
	return code == 200
}

// WaitReady waits up to timeout for Ready.
func (i *Istiod) WaitReady(timeout time.Duration) {
	i.t.Helper()
	bridgetest.Eventually(i.t, timeout, "istiod to be ready", func() bool {
		if !i.Running() {
			i.t.Fatalf("istiod exited:\n%s", tail(i.Log(), 8<<10))
		}
		return i.Ready()
	})
}

// Config is one resource of istiod's config store, as /debug/configz
// shows it.
type Config struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		ResourceVersion string            `json:"resourceVersion"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// Configs returns istiod's config store of kind (ServiceEntry,
// WorkloadEntry, ...) by namespace/name, from /debug/configz.
func (i *Istiod) Configs(kind string) map[string]Config {
	i.t.Helper()
	var all []Config
	i.getJSON("/debug/configz", &all)
	out := map[string]Config{}
	for _, c := range all {
		if c.Kind == kind {
			out[c.Metadata.Namespace+"/"+c.Metadata.Name] = c
		}
	}
	return out
}

// Service is a service of istiod's registry, as /debug/registryz shows
// it (the fields the tests read).
type Service struct {
	Hostname   string `json:"hostname"`
	Attributes struct {
		ServiceRegistry string `json:"ServiceRegistry"`
		Namespace       string `json:"Namespace"`
	} `json:"Attributes"`
	Ports []struct {
		Name     string `json:"name"`
		Port     int    `json:"port"`
		Protocol string `json:"protocol"`
	} `json:"ports"`
	Resolution int `json:"resolution"`
}

// Services returns istiod's service registry by hostname, from
// /debug/registryz.
func (i *Istiod) Services() map[string]Service {
	i.t.Helper()
	var all []Service
	i.getJSON("/debug/registryz", &all)
	out := map[string]Service{}
	for _, s := range all {
		out[s.Hostname] = s
	}
	return out
}

func (i *Istiod) getJSON(path string, v any) {
	i.t.Helper()
	code, body := bridgetest.Get("http://" + i.HTTPAddr + path)
	if code != 200 {
		i.t.Fatalf("istiod %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		i.t.Fatalf("istiod %s: %v: %.500s", path, err, body)
	}
}

// GRPCBootstrap is a gRPC xDS bootstrap for a proxyless client of istiod
// in namespace: the node id and metadata istio's agent writes for one
// (GENERATOR grpc, so that istiod answers with its gRPC generator).
func (i *Istiod) GRPCBootstrap(namespace string) string {
	node := map[string]any{
		"id": "sidecar~127.0.0.1~client." + namespace + "~" + namespace + ".svc.cluster.local",
		"metadata": map[string]string{
			"GENERATOR":  "grpc",
			"NAMESPACE":  namespace,
			"CLUSTER_ID": "Kubernetes",
		},
	}
	b, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":      i.XDSAddr,
			"channel_creds":   []any{map[string]string{"type": "insecure"}},
			"server_features": []string{"xds_v3"},
		}},
		"node": node,
	})
	return string(b)
}

// tail is the last n bytes of s, from a line start.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if j := strings.IndexByte(s, '\n'); j >= 0 {
		s = s[j+1:]
	}
	return "...\n" + s
}
