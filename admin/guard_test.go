package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
)

func TestGuardConfirm(t *testing.T) {
	var got []string
	h := Handler(Options{
		Pending: func() []string { return nil },
		Sources: func() []manager.SourceStatus { return nil },
		Confirm: func(_ context.Context, source string) error {
			got = append(got, source)
			switch source {
			case "nope":
				return fmt.Errorf("%w %q", manager.ErrNoSource, source)
			case "dns":
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
		{http.MethodPost, "/guard/confirm?source=nope", http.StatusNotFound},
		{http.MethodPost, "/guard/confirm", http.StatusBadRequest},
		{http.MethodGet, "/guard/confirm?source=consul", http.StatusMethodNotAllowed},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
		if rec.Code != tt.want {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.target, rec.Code, tt.want)
		}
	}
	if len(got) != 3 || got[0] != "consul" || got[1] != "dns" || got[2] != "nope" {
		t.Errorf("confirmed %q, want [consul dns nope]", got)
	}
}

func TestPolicyMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(SourceCollector{Sources: func() []manager.SourceStatus {
		return []manager.SourceStatus{{StatusSnapshot: sources.StatusSnapshot{Name: "consul"},
			Startup: manager.PhaseWarm, GuardHolds: 2,
			Guard:         &manager.GuardSnapshot{HeldServices: 3, HeldEndpoints: 7},
			ServiceErrors: map[string]string{"web": "weights overflow"},
		}}
	}})
	want := map[string]float64{
		`xdsbridge_source_guard_held{kind="services",source="consul"}`:   3,
		`xdsbridge_source_guard_held{kind="endpoints",source="consul"}`:  7,
		`xdsbridge_source_guard_holds_total{source="consul"}`:            2,
		`xdsbridge_source_startup_phase{phase="warm",source="consul"}`:   1,
		`xdsbridge_source_startup_phase{phase="synced",source="consul"}`: 0,
		`xdsbridge_source_service_errors{source="consul"}`:               1,
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
