package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestEndpoints(t *testing.T) {
	var mu sync.Mutex
	pending := []string{"static", "consul"}
	a, b := sources.NewStatus("static"), sources.NewStatus("consul")
	statuses := func() []manager.SourceStatus {
		return []manager.SourceStatus{{StatusSnapshot: a.Snapshot()}, {StatusSnapshot: b.Snapshot()}}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(SourceCollector{Sources: statuses})
	h := Handler(Options{
		Pending: func() []string {
			mu.Lock()
			defer mu.Unlock()
			return pending
		},
		Sources:  statuses,
		Gatherer: reg,
		Clients:  func() any { return []string{"node-1"} },
	})

	if code, _ := get(t, h, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	code, body := get(t, h, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "static, consul") {
		t.Errorf("/readyz before sync = %d %q", code, body)
	}

	a.Succeeded()
	b.Failed(io.ErrUnexpectedEOF)
	b.Dropped(3)
	mu.Lock()
	pending = nil
	mu.Unlock()
	if code, body := get(t, h, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after sync = %d %q", code, body)
	}

	code, body = get(t, h, "/sources")
	var snaps []manager.SourceStatus
	if err := json.Unmarshal([]byte(body), &snaps); code != http.StatusOK || err != nil {
		t.Fatalf("/sources = %d %q: %v", code, body, err)
	}
	if len(snaps) != 2 || !snaps[0].Synced || snaps[0].LastSuccess.Before(time.Now().Add(-time.Minute)) ||
		!snaps[1].Stale || snaps[1].LastError != io.ErrUnexpectedEOF.Error() || snaps[1].Dropped != 3 {
		t.Errorf("/sources = %s", body)
	}

	code, body = get(t, h, "/metrics")
	for _, want := range []string{
		`xdsbridge_source_stale{source="consul"} 1`,
		`xdsbridge_source_stale{source="static"} 0`,
		`xdsbridge_source_dropped_endpoints_total{source="consul"} 3`,
		`xdsbridge_source_synced{source="static"} 1`,
		`xdsbridge_source_last_success_timestamp_seconds{source="consul"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if code != http.StatusOK {
		t.Errorf("/metrics = %d", code)
	}

	if code, body := get(t, h, "/clients"); code != http.StatusOK || !strings.Contains(body, "node-1") {
		t.Errorf("/clients = %d %q", code, body)
	}
}

func TestOptionalEndpointsAbsent(t *testing.T) {
	h := Handler(Options{Pending: func() []string { return nil }, Sources: func() []manager.SourceStatus { return nil }})
	for _, path := range []string{"/metrics", "/clients", "/debug/pprof/", "/debug/pprof/cmdline"} {
		if code, _ := get(t, h, path); code != http.StatusNotFound {
			t.Errorf("%s = %d, want 404", path, code)
		}
	}
}

// TestPProfOffSaysHowToTurnItOn checks that the profiler's paths, while it
// is off, answer 404 with one line naming the key that turns it on.
func TestPProfOffSaysHowToTurnItOn(t *testing.T) {
	h := Handler(Options{Pending: func() []string { return nil }, Sources: func() []manager.SourceStatus { return nil }})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		code, body := get(t, h, path)
		if code != http.StatusNotFound || !strings.Contains(body, "admin.pprof: true") || strings.Count(body, "\n") != 1 {
			t.Errorf("%s = %d %q, want 404 and one line naming admin.pprof", path, code, body)
		}
	}
}
