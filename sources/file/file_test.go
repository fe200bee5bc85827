package file

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		cfg      map[string]any
		wantErr  string
		wantPath string
		wantPoll time.Duration
	}{
		{name: "relative path and default poll", cfg: map[string]any{"path": "services.yaml"},
			wantPath: "/etc/bridge/services.yaml", wantPoll: DefaultPollInterval},
		{name: "absolute path and poll", cfg: map[string]any{"path": "/srv/s.json", "poll_interval": "2s"},
			wantPath: "/srv/s.json", wantPoll: 2 * time.Second},
		{name: "path missing", cfg: map[string]any{}, wantErr: "path: is required"},
		{name: "unknown key", cfg: map[string]any{"path": "s.yaml", "pol_interval": "1s"}, wantErr: "pol_interval: unknown key"},
		{name: "bad duration", cfg: map[string]any{"path": "s.yaml", "poll_interval": "soon"}, wantErr: "poll_interval"},
		{name: "negative poll", cfg: map[string]any{"path": "s.yaml", "poll_interval": "-1s"}, wantErr: "poll_interval: must be positive"},
		{name: "negative settle", cfg: map[string]any{"path": "s.yaml", "settle": "-1s"}, wantErr: "settle: must be positive"},
		{name: "negative max_bytes", cfg: map[string]any{"path": "s.yaml", "max_bytes": -1}, wantErr: "max_bytes: must be positive"},
		{name: "prometheus target groups", cfg: map[string]any{"path": "targets.json", "format": "prometheus",
			"service_label": "__meta_service", "default_service": "scraped"},
			wantPath: "/etc/bridge/targets.json", wantPoll: DefaultPollInterval},
		{name: "unknown format", cfg: map[string]any{"path": "s.yaml", "format": "file_sd"}, wantErr: `format: "file_sd" is not one of`},
		{name: "label without target groups", cfg: map[string]any{"path": "s.yaml", "format": "xdsbridge", "service_label": "job"},
			wantErr: "service_label: applies to Prometheus target groups only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := New(tt.cfg, sources.Options{Name: "f", BaseDir: "/etc/bridge"})
			if tt.wantErr != "" {
				var ke *settings.KeyError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ke) {
					t.Fatalf("New() error = %v, want a *settings.KeyError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			s := src.(*Source)
			if s.path != tt.wantPath || s.poll != tt.wantPoll {
				t.Errorf("path, poll = %q, %v; want %q, %v", s.path, s.poll, tt.wantPath, tt.wantPoll)
			}
		})
	}
	if typ, ok := sources.Lookup(Type); !ok || typ.Name != "file" {
		t.Errorf("type %q is not registered", Type)
	}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct{ syncbuf.Buffer }

func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

// harness runs a file source over a file in a temporary directory.
type harness struct {
	t      *testing.T
	path   string
	up     chan sources.Update
	status *sources.Status
	logs   *logBuffer
	state  map[string]sources.Service // what the updates so far add up to
}

// start runs the source of services.yaml; tune may adjust it before it
// runs.
func start(t *testing.T, content string, tune func(*Source)) *harness {
	t.Helper()
	return startFile(t, Config{Path: "services.yaml"}, content, tune)
}

// startFile runs the source of c, whose path is a file name, in a new
// directory holding content there (none if empty).
func startFile(t *testing.T, c Config, content string, tune func(*Source)) *harness {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
	h := &harness{t: t, path: filepath.Join(t.TempDir(), c.Path), up: make(chan sources.Update),
		status: sources.NewStatus("f"), logs: &logBuffer{}}
	if content != "" {
		h.write(content)
	}
	c.PollInterval = time.Hour
	s := newSource(c, sources.Options{
		Name: "f", BaseDir: filepath.Dir(h.path), Status: h.status,
		Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
	})
	s.debounce = 20 * time.Millisecond
	s.settle = 50 * time.Millisecond
	if tune != nil {
		tune(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, h.up) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

func (h *harness) write(content string) {
	h.t.Helper()
	if err := os.WriteFile(h.path, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// replace writes content to a new file and renames it over the old one, as
// editors and consul-template do.
func (h *harness) replace(content string) {
	h.t.Helper()
	tmp := h.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, h.path); err != nil {
		h.t.Fatal(err)
	}
}

// next applies the next update to the state the updates so far add up to,
// checks that it then holds exactly the services names, and returns it as
// a Full update in the order of names. The first update must be Full.
func (h *harness) next(names ...string) sources.Update {
	h.t.Helper()
	select {
	case u := <-h.up:
		var err error
		if h.state, err = apply(h.state, u); err != nil {
			h.t.Fatal(err)
		}
		got := slices.Sorted(maps.Keys(h.state))
		if !slices.Equal(got, slices.Sorted(slices.Values(names))) {
			h.t.Fatalf("services after the update = %q, want %q", got, names)
		}
		out := sources.Update{Full: true}
		for _, n := range names {
			out.Services = append(out.Services, h.state[n])
		}
		return out
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no update, want one with %q", names)
		return sources.Update{}
	}
}

// waitStatus waits until the status satisfies cond.
func (h *harness) waitStatus(what string, cond func(sources.StatusSnapshot) bool) sources.StatusSnapshot {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := h.status.Snapshot()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for status %s; status %+v", what, s)
		}
		select {
		case u := <-h.up:
			h.t.Fatalf("unexpected update %+v while waiting for status %s", u, what)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func services(names ...string) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i, n := range names {
		fmt.Fprintf(&b, "- name: %s\n  endpoints: [{address: 10.0.0.%d, port: 80}]\n", n, i+1)
	}
	return b.String()
}

func TestRunLoadsAndFollowsChanges(t *testing.T) {
	h := start(t, services("web"), nil)
	u := h.next("web")
	if e := u.Services[0].Endpoints; len(e) != 1 || e[0].Address != "10.0.0.1" || e[0].Weight != 1 {
		t.Errorf("endpoints = %+v", e)
	}
	if s := h.status.Snapshot(); !s.Synced || s.Stale {
		t.Errorf("status after load = %+v, want synced", s)
	}
	h.replace(services("web", "api"))
	h.next("web", "api")
	h.write(services("api"))
	h.next("api")
}

func TestRunUnchangedRewritePublishesNothing(t *testing.T) {
	h := start(t, services("web"), nil)
	h.next("web")
	// Each rewrite is read (the last success moves on) and sends nothing;
	// waitStatus fails on any update.
	for _, rewrite := range []func(string){h.replace, h.write} {
		before := h.status.Snapshot().LastSuccess
		rewrite(services("web"))
		h.waitStatus("read again", func(s sources.StatusSnapshot) bool { return s.LastSuccess.After(before) })
	}
	h.write(services("web", "api"))
	h.next("web", "api")
}

func TestRunInvalidThenFixed(t *testing.T) {
	h := start(t, services("web"), func(s *Source) { s.poll = 10 * time.Millisecond })
	h.next("web")
	bad := "services:\n- name: web\n  endpoints: [{address: 10.0.0.1, port: 70000}]\n"
	const wantErr = "services.yaml: services[0].endpoints[0].port: 70000 is outside 1..65535"
	h.replace(bad)
	// The poll re-reads the bad file every 10ms: it fails every time but is
	// logged once.
	s := h.waitStatus("failed thrice", func(s sources.StatusSnapshot) bool { return s.Stale && s.Failures >= 3 })
	if !strings.Contains(s.LastError, wantErr) {
		t.Errorf("last error = %q, want it to contain %q", s.LastError, wantErr)
	}
	if n := h.logs.count("outside 1..65535"); n != 1 {
		t.Errorf("the error was logged %d times, want once:\n%s", n, h.logs.String())
	}
	h.replace(services("web", "api"))
	h.next("web", "api")
	if s := h.status.Snapshot(); s.Stale {
		t.Errorf("status after the fix = %+v, want not stale", s)
	}
}

func TestRunMissingFileThenCreated(t *testing.T) {
	h := start(t, "", nil)
	s := h.waitStatus("failed", func(s sources.StatusSnapshot) bool { return s.Stale })
	if s.Synced || !strings.Contains(s.LastError, "services.yaml") {
		t.Errorf("status = %+v, want not synced and an error naming the file", s)
	}
	h.replace(services("web"))
	h.next("web")
	if s := h.status.Snapshot(); !s.Synced {
		t.Errorf("status = %+v, want synced", s)
	}
}

func TestRunRemovedFileKeepsState(t *testing.T) {
	h := start(t, services("web"), nil)
	h.next("web")
	if err := os.Remove(h.path); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("failed", func(s sources.StatusSnapshot) bool { return s.Stale })
	h.write(services("web"))
	// The restored content is what was published: nothing new to send.
	h.waitStatus("recovered", func(s sources.StatusSnapshot) bool { return !s.Stale })
	h.write(services("api"))
	h.next("api")
}

func TestRunPollFallback(t *testing.T) {
	// A write through a hard link in another directory changes the file
	// without an event in the watched one: only the poll can see it.
	h := start(t, services("web"), func(s *Source) { s.poll = 20 * time.Millisecond })
	h.next("web")
	link := filepath.Join(t.TempDir(), "link.yaml")
	if err := os.Link(h.path, link); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if err := os.WriteFile(link, []byte(services("api")), 0o644); err != nil {
		t.Fatal(err)
	}
	h.next("api")
}

// TestRunInPlaceWriterPausingSettle is the fallback where closes are not
// reported (polling, network file systems, other platforms): the file is
// written in place, pausing 300ms at a line boundary where the first half
// is valid YAML on its own (the second endpoint's port cut from 8080 to
// 80), and the writer keeps it open. With the watch and a fast poll both
// looking, the half file is never published, the whole one is once it has
// been quiet for settle.
func TestRunInPlaceWriterPausingSettle(t *testing.T) {
	h := start(t, services("web"), func(s *Source) {
		s.closeWrite = false
		s.settle = DefaultSettle
		s.poll = 20 * time.Millisecond
	})
	h.next("web")
	full := services("web") + "- name: api\n  endpoints:\n  - address: 10.0.0.9\n    port: 8080\n"
	cut := strings.Index(full, "8080") + 2
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(full[:cut] + "\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(full[:cut]+"\n"), false); err != nil {
		t.Fatalf("the first half should be valid on its own: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the writer's pause, not synchronisation
	if _, err := f.WriteAt([]byte(full[cut:]), int64(cut)); err != nil {
		t.Fatal(err)
	}
	u := h.next("web", "api")
	if port := u.Services[1].Endpoints[0].Port; port != 8080 {
		t.Fatalf("published api with port %d: a half-written file", port)
	}
}

func TestRunRejectsLargeFile(t *testing.T) {
	h := start(t, "", func(s *Source) { s.maxBytes = 80 })
	h.write(services("web", "api", "db"))
	h.waitStatus("an error naming max_bytes", func(s sources.StatusSnapshot) bool {
		return strings.Contains(s.LastError, "services.yaml: ") && strings.Contains(s.LastError, "more than max_bytes (80)")
	})
	h.write(services("w"))
	h.next("w")
}
