package etcd

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/etcdtest"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
	"github.com/xdsbridge/xdsbridge/test/testwait"
)

// TestMain lets this test binary also be the grpc-go process the bridge
// tests observe the bridge with (see grpcxdstest.StartObserver).
func TestMain(m *testing.M) {
	grpcxdstest.ObserverMain()
	goleak.VerifyTestMain(m)
}

// patience bounds every wait for something the source must do; a loaded
// machine never reaches it, and how fast things happen is the benchmark's
// to measure.
const patience = testwait.Patience

// running is a source under test: a goroutine applies its updates to
// state, as the manager would, and checks the contract on the way.
type running struct {
	t      testing.TB
	status *sources.Status
	logs   *syncbuf.Buffer

	mu      sync.Mutex
	state   map[string]sources.Service
	updates []sources.Update
	errs    []string
}

// startSource runs an etcd source with cfg (endpoints default to srv's
// client URL; retry_max to 1s) until the test ends.
func startSource(t testing.TB, srv *etcdtest.Server, cfg map[string]any) *running {
	t.Helper()
	cfg = maps.Clone(cfg)
	if _, ok := cfg["endpoints"]; !ok {
		cfg["endpoints"] = []any{srv.ClientURL}
	}
	if _, ok := cfg["retry_max"]; !ok {
		cfg["retry_max"] = "1s"
	}
	r := &running{t: t, status: sources.NewStatus(t.Name()), logs: &syncbuf.Buffer{}, state: map[string]sources.Service{}}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	src, err := New(cfg, sources.Options{Name: t.Name(), Logger: log, Status: r.status})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan sources.Update)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, up) }()
	go func() {
		for {
			select {
			case u := <-up:
				r.apply(u)
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			t.Error(e)
		}
		if t.Failed() {
			t.Logf("source log:\n%s", r.logs.String())
		}
	})
	return r
}

func (r *running) apply(u sources.Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.updates) == 0 && !u.Full {
		r.errs = append(r.errs, "first update is not Full")
	}
	if !u.Full && len(u.Services) == 0 && len(u.Removed) == 0 {
		r.errs = append(r.errs, "empty partial update")
	}
	r.updates = append(r.updates, u)
	if u.Full {
		clear(r.state)
	}
	for _, s := range u.Services {
		if !slices.IsSortedFunc(s.Endpoints, sources.Endpoint.Compare) {
			r.errs = append(r.errs, "endpoints of "+s.Name+" not sorted")
		}
		r.state[s.Name] = s
	}
	for _, n := range u.Removed {
		delete(r.state, n)
	}
}

// service returns the served state of one service.
func (r *running) service(name string) (sources.Service, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.state[name]
	return s, ok
}

// names returns the served services' names, sorted.
func (r *running) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.state))
}

// fullUpdates counts the Full updates received, and those marked Reset.
func (r *running) fullUpdates() (full, reset int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.updates {
		if u.Full {
			full++
		}
		if u.Reset {
			reset++
		}
	}
	return full, reset
}

// logLines counts the log lines that contain msg.
func (r *running) logLines(msg string) int {
	return strings.Count(r.logs.String(), msg)
}

// waitFor waits until cond holds, failing the test after patience.
func (r *running) waitFor(what string, cond func() bool) {
	r.t.Helper()
	testwait.Eventually(r.t, patience, what, cond)
}

// waitService waits until the served service name has exactly want
// (compared by instance, see inst).
func (r *running) waitService(name string, want ...inst) {
	r.t.Helper()
	slices.SortFunc(want, inst.compare)
	var got []inst
	testwait.Eventually(r.t, patience, "service "+name+" to be "+show(want), func() bool {
		s, ok := r.service(name)
		got = instances(s)
		return ok && slices.Equal(got, want)
	})
}

// waitGone waits until the service name is no longer served.
func (r *running) waitGone(name string) {
	r.t.Helper()
	testwait.Eventually(r.t, patience, "service "+name+" removed", func() bool {
		_, ok := r.service(name)
		return !ok
	})
}

// inst is what the tests compare of an endpoint.
type inst struct {
	addr     string
	port     uint32
	weight   uint32
	priority uint32
	meta     string // the "version" metadata
}

func (a inst) compare(b inst) int {
	return strings.Compare(a.String(), b.String())
}

func (a inst) String() string {
	return strings.Join([]string{a.addr, itoa(a.port), "w" + itoa(a.weight), "p" + itoa(a.priority), a.meta}, "/")
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func instances(s sources.Service) []inst {
	out := make([]inst, 0, len(s.Endpoints))
	for _, e := range s.Endpoints {
		out = append(out, inst{e.Address, e.Port, e.Weight, e.Priority, e.Metadata["version"]})
	}
	slices.SortFunc(out, inst.compare)
	return out
}

func show(is []inst) string {
	s := make([]string, len(is))
	for i, x := range is {
		s[i] = x.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
