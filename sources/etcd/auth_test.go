package etcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/etcdtest"
)

// TestClientCertificates reads an etcd that serves TLS only and requires
// client certificates: with the tls block the source is served; without
// a client certificate it fails, stays stale and logs it once.
func TestClientCertificates(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.WithTLS())
	ctx := t.Context()
	reg := etcdtest.Registrar{C: srv.Client(t)}
	a1 := inst{addr: "10.0.0.1", port: 8080, weight: 1}
	must(t, reg.GRPC(ctx, "services/web", addr(a1), nil))

	cfg := map[string]any{
		"services": []any{map[string]any{"prefix": "services/", "format": FormatGRPCNaming}},
		"tls":      map[string]any{"ca_file": srv.TLS.CAFile, "cert_file": srv.TLS.CertFile, "key_file": srv.TLS.KeyFile},
	}
	r := startSource(t, srv, cfg)
	r.waitService("web", a1)

	cfg["tls"] = map[string]any{"ca_file": srv.TLS.CAFile}
	bad := startSource(t, srv, cfg)
	bad.waitFor("failures without a client certificate", func() bool { return bad.status.Snapshot().FailuresTotal >= 3 })
	if st := bad.status.Snapshot(); st.Synced || !st.Stale {
		t.Errorf("status %+v without a client certificate, want stale and never synced", st)
	}
	if n := bad.logLines(msgFailing); n != 1 {
		t.Errorf("%d failure lines, want 1", n)
	}
}

// TestAuthentication reads with an etcd user whose role may read the
// prefix; with a wrong password the source fails, and the
// authentication requests etcd serves stay within what the backoff
// allows, one per attempt.
func TestAuthentication(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	reg := etcdtest.Registrar{C: srv.Client(t)}
	a1 := inst{addr: "10.0.0.1", port: 8080, weight: 1}
	must(t, reg.GRPC(ctx, "services/web", addr(a1), nil))
	must(t, srv.EnableAuth(ctx, "bridge", "s3cret", "services/"))
	dir := t.TempDir()
	good, wrong := filepath.Join(dir, "good"), filepath.Join(dir, "wrong")
	must(t, os.WriteFile(good, []byte("s3cret\n"), 0o600))
	must(t, os.WriteFile(wrong, []byte("guess\n"), 0o600))

	cfg := map[string]any{
		"services":  []any{map[string]any{"prefix": "services/", "format": FormatGRPCNaming}},
		"auth":      map[string]any{"user": "bridge", "password_file": good},
		"retry_min": "50ms", "retry_max": "500ms",
	}
	r := startSource(t, srv, cfg)
	r.waitService("web", a1)

	before := authRequests(t, srv)
	cfg["auth"] = map[string]any{"user": "bridge", "password_file": wrong}
	start := time.Now()
	bad := startSource(t, srv, cfg)
	bad.waitFor("failures with a wrong password", func() bool { return bad.status.Snapshot().FailuresTotal >= 6 })
	elapsed := time.Since(start)
	requests := authRequests(t, srv) - before
	t.Logf("%v authentication requests, %d failures in %s", requests, bad.status.Snapshot().FailuresTotal, elapsed)
	if requests < 6 {
		t.Errorf("etcd counted %v authentication requests for 6 failures: the metric does not count them", requests)
	}
	if limit := maxAttempts(elapsed, 50*time.Millisecond, 500*time.Millisecond); requests > float64(limit) {
		t.Errorf("%v authentication requests in %s, want at most %d (the backoff's pace)", requests, elapsed, limit)
	}
	st := bad.status.Snapshot()
	if !strings.Contains(st.LastError, "authentication failed") {
		t.Errorf("last error %q, want etcd's authentication failure", st.LastError)
	}
	if n := bad.logLines(msgFailing); n != 1 {
		t.Errorf("%d failure lines, want 1", n)
	}
}

func authRequests(t *testing.T, srv *etcdtest.Server) float64 {
	t.Helper()
	m, err := srv.Metrics()
	must(t, err)
	n, _ := etcdtest.Count(m, "grpc_server_started_total", `grpc_method="Authenticate"`)
	return n
}

// maxAttempts is the most attempts a loop paced by sources.Backoff{Min:
// lo, Max: hi} can make in elapsed, plus one in flight: every wait is at
// least half its step, and the steps double from lo up to hi.
func maxAttempts(elapsed, lo, hi time.Duration) int {
	n, t, d := 1, time.Duration(0), lo
	for t+d/2 <= elapsed {
		t += d / 2
		n++
		d = min(2*d, hi)
	}
	return n + 1
}
