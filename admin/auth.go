package admin

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/xdsbridge/xdsbridge/internal/filestamp"
	"github.com/xdsbridge/xdsbridge/internal/pacing"
)

// tokenAuth requires a bearer token read from a file, re-read when the file
// changes so that a rotated token takes effect without a restart. A file
// that becomes unreadable or empty keeps the last good token (logged when
// the error is new, the same one at most once a minute, and the recovery
// once):
// locking operators out in the middle of an incident helps nobody. The
// token itself is never logged.
type tokenAuth struct {
	log *slog.Logger

	mu    sync.Mutex
	file  filestamp.Cache[string]
	fails *pacing.FailureLog
}

// RequireToken returns a middleware that requires the bearer token held in
// the file at path on every request but /healthz and /readyz (probes carry
// no secrets). It reads the token once now and fails if the file cannot be
// read or holds no token.
func RequireToken(path string, log *slog.Logger) (func(http.Handler) http.Handler, error) {
	a, err := newTokenAuth(path, log)
	if err != nil {
		return nil, err
	}
	return func(h http.Handler) http.Handler { return a.wrap(h, "/healthz", "/readyz") }, nil
}

func newTokenAuth(path string, log *slog.Logger) (*tokenAuth, error) {
	a := &tokenAuth{log: log, fails: &pacing.FailureLog{Log: log, Level: slog.LevelError, NewErrors: true,
		FailingMsg:   "re-reading the admin token file failed; the previous token stays valid",
		RecoveredMsg: "the admin token file is readable again"}}
	a.file = filestamp.Cache[string]{Paths: []string{path}, Parse: func() (string, error) { return filestamp.ReadToken(path) }}
	if _, err := a.file.Get(); err != nil {
		return nil, fmt.Errorf("reading the admin token: %w", err)
	}
	return a, nil
}

func (a *tokenAuth) token() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	tok, err := a.file.Get()
	if err != nil {
		a.fails.Failed(err)
	} else {
		a.fails.Recovered()
	}
	return tok
}

// wrap requires the token on every path but the open ones.
func (a *tokenAuth) wrap(next http.Handler, open ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(open, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(a.token())) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="xdsbridge admin"`)
			http.Error(w, "unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
