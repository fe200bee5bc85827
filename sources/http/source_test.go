package http

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/sources"
)

const (
	webDoc   = `{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 8080}]}]}`
	web2Doc  = `{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.2", "port": 8080}]}]}`
	emptyDoc = `{"services": []}`
)

// registry is the in-process HTTP server the tests poll. Its handler
// answers with the current reply and records every request.
type registry struct {
	mu       sync.Mutex
	reply    func(w nethttp.ResponseWriter, r *nethttp.Request)
	requests []*nethttp.Request
	polled   chan struct{} // one value per request, never blocking
}

func newRegistry(t *testing.T, tlsServer bool, doc string) (*registry, *httptest.Server) {
	t.Helper()
	reg := &registry{polled: make(chan struct{}, 1000)}
	reg.serve(doc, "")
	h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		reg.mu.Lock()
		reg.requests = append(reg.requests, r.Clone(context.Background()))
		reply := reg.reply
		reg.mu.Unlock()
		reply(w, r)
		reg.polled <- struct{}{}
	})
	var srv *httptest.Server
	if tlsServer {
		srv = httptest.NewUnstartedServer(h)
		srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
		srv.StartTLS()
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return reg, srv
}

// serve makes the registry answer doc with etag (none when empty), and 304
// to a request that names that etag.
func (reg *registry) serve(doc, etag string) {
	reg.set(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if etag != "" && r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(nethttp.StatusNotModified)
			return
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, doc)
	})
}

func (reg *registry) set(f func(w nethttp.ResponseWriter, r *nethttp.Request)) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.reply = f
}

func (reg *registry) last() *nethttp.Request {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.requests[len(reg.requests)-1]
}

// patience bounds every wait of these tests: a failure detector, not a
// measurement, that a loaded machine must never reach.
const patience = 30 * time.Second

// waitPolls waits until the registry has answered n more requests.
func (reg *registry) waitPolls(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-reg.polled:
		case <-time.After(patience):
			t.Fatal("the source did not poll")
		}
	}
}

// run starts the source of cfg and returns its updates and status; the
// source stops when the test ends.
func run(t *testing.T, cfg map[string]any) (<-chan sources.Update, *sources.Status) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) })
	st := sources.NewStatus("cmdb")
	if _, ok := cfg["interval"]; !ok {
		cfg["interval"] = "10ms"
	}
	src, err := New(cfg, sources.Options{Name: "cmdb", BaseDir: t.TempDir(), Status: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan sources.Update)
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx, up) }()
	t.Cleanup(func() { cancel(); <-done })
	return up, st
}

func nextUpdate(t *testing.T, up <-chan sources.Update) sources.Update {
	t.Helper()
	select {
	case u := <-up:
		return u
	case <-time.After(patience):
		t.Fatal("no update")
		return sources.Update{}
	}
}

func noUpdate(t *testing.T, up <-chan sources.Update) {
	t.Helper()
	select {
	case u := <-up:
		t.Fatalf("unexpected update %+v", u)
	default:
	}
}

func addresses(u sources.Update) string {
	var b []string
	for _, s := range u.Services {
		for _, e := range s.Endpoints {
			b = append(b, s.Name+"="+e.Address)
		}
	}
	return fmt.Sprintf("full=%v %v", u.Full, b)
}

// waitStale polls the status until its staleness is want.
func waitStale(t *testing.T, st *sources.Status, want bool) sources.StatusSnapshot {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		s := st.Snapshot()
		if s.Stale == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale = %v, want %v (last error %q)", s.Stale, want, s.LastError)
		}
		time.Sleep(5 * time.Millisecond) // polling a status, not synchronising
	}
}

// TestOutcomes walks the source through the three outcomes: a good answer,
// an authoritative empty one, and failures that keep the last good state.
func TestOutcomes(t *testing.T) {
	reg, srv := newRegistry(t, false, webDoc)
	up, st := run(t, map[string]any{"url": srv.URL, "timeout": "2s", "max_body_bytes": 64 << 10})
	if got := addresses(nextUpdate(t, up)); got != "full=true [web=10.0.0.1]" {
		t.Fatalf("first update %s", got)
	}
	if s := st.Snapshot(); !s.Synced || s.Stale {
		t.Fatalf("status after a good answer: %+v", s)
	}
	// The same answer again sends nothing.
	reg.waitPolls(t, 2)
	noUpdate(t, up)

	failures := []struct {
		name  string
		reply func(w nethttp.ResponseWriter, r *nethttp.Request)
		err   string
	}{
		{"malformed JSON", func(w nethttp.ResponseWriter, _ *nethttp.Request) {
			fmt.Fprint(w, `{"services": [{"name": "web", "endpoints": [}`)
		}, `parsing the body as JSON (Content-Type "text/plain; charset=utf-8" is neither JSON nor YAML; sniffed JSON): parsing JSON`},
		{"invalid endpoint", func(w nethttp.ResponseWriter, _ *nethttp.Request) {
			fmt.Fprint(w, `{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.9", "port": 0}]}]}`)
		}, "services[0].endpoints[0].port"},
		{"50 MB body", func(w nethttp.ResponseWriter, _ *nethttp.Request) {
			chunk := []byte(strings.Repeat(" ", 1<<20))
			for range 50 {
				if _, err := w.Write(chunk); err != nil {
					return // the client gave up, as it should
				}
			}
		}, "body exceeds max_body_bytes (65536)"},
		{"slow body", func(w nethttp.ResponseWriter, r *nethttp.Request) {
			fmt.Fprint(w, `{"services": [`)
			w.(nethttp.Flusher).Flush()
			<-r.Context().Done() // never finishes; the client's timeout ends it
		}, "context deadline exceeded"},
		{"server error", func(w nethttp.ResponseWriter, _ *nethttp.Request) {
			nethttp.Error(w, "registry down", nethttp.StatusServiceUnavailable)
		}, `status 503 Service Unavailable: "registry down"`},
		{"304 without a prior ETag", func(w nethttp.ResponseWriter, _ *nethttp.Request) {
			w.WriteHeader(nethttp.StatusNotModified)
		}, "status 304"},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			reg.set(f.reply)
			s := waitStale(t, st, true)
			if !strings.Contains(s.LastError, f.err) {
				t.Errorf("last error %q, want it to contain %q", s.LastError, f.err)
			}
			noUpdate(t, up)
			reg.serve(webDoc, "")
			waitStale(t, st, false)
			noUpdate(t, up) // the good answer is the one already sent
		})
	}

	reg.serve(emptyDoc, "")
	if got := addresses(nextUpdate(t, up)); got != "full=true []" {
		t.Errorf("authoritative empty: update %s", got)
	}
}

// TestETag checks If-None-Match: a 304 confirms the state without an
// update, a new ETag brings the new content.
func TestETag(t *testing.T) {
	reg, srv := newRegistry(t, false, "")
	reg.serve(webDoc, `"v1"`)
	up, st := run(t, map[string]any{"url": srv.URL})
	nextUpdate(t, up)
	reg.waitPolls(t, 3)
	if got := reg.last().Header.Get("If-None-Match"); got != `"v1"` {
		t.Errorf("If-None-Match = %q, want \"v1\"", got)
	}
	noUpdate(t, up)
	if s := st.Snapshot(); s.Stale || s.Failures != 0 {
		t.Errorf("status after 304s: %+v", s)
	}
	reg.serve(web2Doc, `"v2"`)
	if got := addresses(nextUpdate(t, up)); got != "full=true [web=10.0.0.2]" {
		t.Errorf("update after a new ETag: %s", got)
	}
}

// TestTokenRotation checks that the token file is read for every request.
func TestTokenRotation(t *testing.T) {
	reg, srv := newRegistry(t, false, webDoc)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, "first\n")
	up, st := run(t, map[string]any{"url": srv.URL, "bearer_token_file": tokenFile})
	nextUpdate(t, up)
	reg.waitPolls(t, 1)
	if got := reg.last().Header.Get("Authorization"); got != "Bearer first" {
		t.Errorf("Authorization = %q, want Bearer first", got)
	}
	writeFile(t, tokenFile, "second")
	deadline := time.Now().Add(patience)
	for reg.waitPolls(t, 1); reg.last().Header.Get("Authorization") != "Bearer second"; reg.waitPolls(t, 1) {
		if time.Now().After(deadline) {
			t.Fatal("the rotated token was never sent")
		}
	}
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	if s := waitStale(t, st, true); !strings.Contains(s.LastError, "reading bearer_token_file") {
		t.Errorf("last error %q", s.LastError)
	}
}

// TestTLS polls an https registry that demands a client certificate,
// trusting it through ca_file.
func TestTLS(t *testing.T) {
	_, srv := newRegistry(t, true, webDoc)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	// The server's own key pair serves as the client's certificate: the
	// server asks for one, any one.
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	writeKeyPair(t, srv.TLS.Certificates[0], cert, key)

	up, _ := run(t, map[string]any{"url": srv.URL, "tls": map[string]any{
		"ca_file": ca, "cert_file": cert, "key_file": key, "server_name": "example.com"}})
	if got := addresses(nextUpdate(t, up)); got != "full=true [web=10.0.0.1]" {
		t.Errorf("update over TLS: %s", got)
	}

	// Without the CA the server is not trusted.
	bad, st := run(t, map[string]any{"url": srv.URL})
	noUpdate(t, bad)
	if s := waitStale(t, st, true); !strings.Contains(s.LastError, "certificate") {
		t.Errorf("last error without ca_file %q", s.LastError)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func writeKeyPair(t *testing.T, c tls.Certificate, certPath, keyPath string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, certPath, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})))
	writeFile(t, keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"no url", map[string]any{}, "url: is required"},
		{"bad scheme", map[string]any{"url": "ftp://x/y"}, `url: scheme "ftp" is not http or https`},
		{"no host", map[string]any{"url": "http:///y"}, "url: \"http:///y\" has no host"},
		{"credentials", map[string]any{"url": "http://u:p@x/y"}, "url: credentials in the URL"},
		{"unparsable url", map[string]any{"url": "http://x y/%zz"}, "url: "},
		{"zero interval", map[string]any{"url": "http://x/", "interval": "0s"}, "interval: must be positive"},
		{"bad interval", map[string]any{"url": "http://x/", "interval": "often"}, "interval: "},
		{"negative timeout", map[string]any{"url": "http://x/", "timeout": "-1s"}, "timeout: must be positive"},
		{"zero body", map[string]any{"url": "http://x/", "max_body_bytes": 0}, "max_body_bytes: 0 is outside"},
		{"huge body", map[string]any{"url": "http://x/", "max_body_bytes": int64(1) << 40}, "max_body_bytes: 1099511627776 is outside"},
		{"tls on http", map[string]any{"url": "http://x/", "tls": map[string]any{"ca_file": "ca.pem"}}, "tls: applies to https URLs only"},
		{"cert without key", map[string]any{"url": "https://x/", "tls": map[string]any{"cert_file": "c.pem"}}, "tls.key_file: is required"},
		{"key without cert", map[string]any{"url": "https://x/", "tls": map[string]any{"key_file": "k.pem"}}, "tls.cert_file: is required"},
		{"unknown key", map[string]any{"url": "http://x/", "intervall": "1s"}, "intervall: unknown key"},
		{"unknown tls key", map[string]any{"url": "https://x/", "tls": map[string]any{"insecure": true}}, "tls.insecure: unknown key"},
		{"unknown format", map[string]any{"url": "http://x/", "format": "http_sd"}, `format: "http_sd" is not one of auto, xdsbridge, prometheus`},
		{"default service without target groups", map[string]any{"url": "http://x/", "format": "xdsbridge", "default_service": "x"},
			"default_service: applies to Prometheus target groups only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, sources.Options{Name: "cmdb"})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("New error = %v, want prefix %q", err, tt.want)
			}
		})
	}
}
