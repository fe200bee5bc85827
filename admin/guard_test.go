package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

func TestGuardConfirm(t *testing.T) {
	var got []string
	h := Handler(Options{
		Pending: func() []string { return nil },
		Sources: func() []sources.StatusSnapshot { return nil },
		Confirm: func(_ context.Context, source string) error {
			got = append(got, source)
			if source != "consul" {
				return errors.New("no hold")
			}
			return nil
		},
	})
	for _, tt := range []struct {
		method, target string
		want           int
	}{
		{http.MethodPost, "/guard/confirm?source=consul", http.StatusOK},
		{http.MethodPost, "/guard/confirm?source=dns", http.StatusConflict},
		{http.MethodPost, "/guard/confirm", http.StatusBadRequest},
		{http.MethodGet, "/guard/confirm?source=consul", http.StatusMethodNotAllowed},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
		if rec.Code != tt.want {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.target, rec.Code, tt.want)
		}
	}
	if len(got) != 2 || got[0] != "consul" || got[1] != "dns" {
		t.Errorf("confirmed %q, want [consul dns]", got)
	}
}
