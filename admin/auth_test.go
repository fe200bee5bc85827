package admin

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
)

func request(h http.Handler, method, path, token string) int {
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestPProfGetOnly(t *testing.T) {
	h := Handler(Options{PProf: true, Pending: func() []string { return nil }, Sources: func() []manager.SourceStatus { return nil }})
	if code := request(h, http.MethodGet, "/debug/pprof/", ""); code != http.StatusOK {
		t.Errorf("GET /debug/pprof/ = %d", code)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/symbol"} {
		if code := request(h, http.MethodPost, path, ""); code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s = %d, want 405", path, code)
		}
	}
}

// TestRequireToken checks the token guards everything but the probes, is
// re-read when the file changes (the old one then fails), survives the file
// going away, and never reaches the log.
func TestRequireToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	write := func(tok string, mod time.Time) {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	write("s3cret-one", now)
	var logs bytes.Buffer
	mw, err := RequireToken(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(Handler(Options{Pending: func() []string { return nil }, Sources: func() []manager.SourceStatus { return nil }}))
	cases := []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/sources", "", http.StatusUnauthorized},
		{"/sources", "wrong", http.StatusUnauthorized},
		{"/sources", "s3cret-one", http.StatusOK},
		{"/nothing", "", http.StatusUnauthorized},
	}
	for _, c := range cases {
		if code := request(h, http.MethodGet, c.path, c.token); code != c.want {
			t.Errorf("GET %s with token %q = %d, want %d", c.path, c.token, code, c.want)
		}
	}
	write("s3cret-two", now.Add(time.Second))
	if request(h, http.MethodGet, "/sources", "s3cret-one") != http.StatusUnauthorized ||
		request(h, http.MethodGet, "/sources", "s3cret-two") != http.StatusOK {
		t.Error("the rotated token was not picked up")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if request(h, http.MethodGet, "/sources", "s3cret-two") != http.StatusOK {
		t.Error("the last good token stopped working when the file went away")
	}
	if !strings.Contains(logs.String(), "token") || strings.Contains(logs.String(), "s3cret") {
		t.Errorf("log = %q, want the failure logged without the token", logs.String())
	}
}

func TestRequireTokenEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RequireToken(path, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("error = %v, want it to say the file is empty", err)
	}
}
