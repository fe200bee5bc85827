package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/manager"
)

// TestReloadEndpoint checks how POST /-/reload answers each outcome.
func TestReloadEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name     string
		invalid  bool
		err      error
		code     int
		contains string
	}{
		{"applied", false, nil, http.StatusOK, `"kept": "a"`},
		{"invalid", true, errors.New("bridge.yaml: sources[0].type: unknown source type"), http.StatusBadRequest, "sources[0].type"},
		{"not applied", false, errors.New("reconfiguring sources: context deadline exceeded"), http.StatusInternalServerError, "deadline"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			h := Handler(Options{Pending: func() []string { return nil }, Sources: func() []manager.SourceStatus { return nil },
				Reload: func(context.Context) (any, bool, error) {
					calls++
					return map[string]string{"kept": "a"}, tt.invalid, tt.err
				}})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/-/reload", nil))
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.contains) || calls != 1 {
				t.Errorf("POST /-/reload = %d %q after %d reloads, want %d with %q", rec.Code, rec.Body, calls, tt.code, tt.contains)
			}
			if code := request(h, http.MethodGet, "/-/reload", ""); code != http.StatusMethodNotAllowed || calls != 1 {
				t.Errorf("GET /-/reload = %d (%d reloads), want 405 and no reload", code, calls)
			}
		})
	}
	h := Handler(Options{Pending: func() []string { return nil }, Sources: func() []manager.SourceStatus { return nil }})
	if code := request(h, http.MethodPost, "/-/reload", ""); code != http.StatusNotFound {
		t.Errorf("POST /-/reload without Reload = %d, want 404", code)
	}
}
