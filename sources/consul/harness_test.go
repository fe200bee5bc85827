package consul

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// running is a source under test: a goroutine applies its updates to
// state, as the manager would.
type running struct {
	t      testing.TB
	src    *Source
	status *sources.Status
	logs   *logRecorder

	mu      sync.Mutex
	state   map[string]sources.Service
	updates int
	full    time.Time        // when the first (Full) update arrived
	history map[string][]int // endpoint counts published per cluster (-1: removed)
	kinds   []updateKind     // every update's kind, in order
	// removed counts the services removed, or served with fewer
	// endpoints than before, by the updates.
	removed int
	errs    []string // contract violations seen by the reader

	// stop stops the source and returns what Run returned; the test's
	// end stops it too.
	stop func() error
}

// startSource runs a consul source against agent with cfg (address
// defaults to the agent's HTTP address; agent may be nil when cfg has an
// address), and stops it when the test ends.
func startSource(t testing.TB, agent *consultest.Agent, cfg map[string]any, tweak ...func(*Source)) *running {
	t.Helper()
	cfg = maps.Clone(cfg)
	if _, ok := cfg["address"]; !ok && agent != nil {
		cfg["address"] = agent.HTTPAddr
	}
	if _, ok := cfg["retry_max"]; !ok {
		cfg["retry_max"] = "1s"
	}
	r := &running{t: t, status: sources.NewStatus(t.Name()), logs: &logRecorder{}, state: map[string]sources.Service{},
		history: map[string][]int{}}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	log = slog.New(teeHandler{log.Handler(), r.logs})
	src, err := New(cfg, sources.Options{Name: t.Name(), Logger: log, Status: r.status})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, f := range tweak {
		f(src)
	}
	r.src = src
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan sources.Update)
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- src.Run(ctx, up) }()
	go func() {
		for {
			select {
			case u := <-up:
				r.apply(u, started)
			case <-ctx.Done():
				return
			}
		}
	}()
	r.stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := r.stop(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			t.Error(e)
		}
	})
	return r
}

func (r *running) apply(u sources.Update, started time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.updates == 0 {
		if !u.Full {
			r.errs = append(r.errs, "first update is not Full")
		}
		r.full = time.Now()
		_ = started
	}
	r.updates++
	if u.Full {
		for name, had := range r.state {
			if i := slices.IndexFunc(u.Services, func(s sources.Service) bool { return s.Name == name }); i < 0 || len(u.Services[i].Endpoints) < len(had.Endpoints) {
				r.removed++
			}
		}
	} else {
		for _, s := range u.Services {
			if had, ok := r.state[s.Name]; ok && len(s.Endpoints) < len(had.Endpoints) {
				r.removed++
			}
		}
	}
	r.removed += len(u.Removed)
	r.kinds = append(r.kinds, updateKind{full: u.Full, reset: u.Reset})
	if u.Full {
		clear(r.state)
	}
	for _, s := range u.Services {
		if !slices.IsSortedFunc(s.Endpoints, sources.Endpoint.Compare) {
			r.errs = append(r.errs, "endpoints of "+s.Name+" not sorted")
		}
		r.state[s.Name] = s
		r.history[s.Name] = append(r.history[s.Name], len(s.Endpoints))
	}
	for _, n := range u.Removed {
		delete(r.state, n)
		r.history[n] = append(r.history[n], -1)
	}
	if !u.Full && len(u.Services) == 0 && len(u.Removed) == 0 {
		r.errs = append(r.errs, "empty partial update")
	}
}

// service returns the current state of one cluster.
func (r *running) service(name string) (sources.Service, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.state[name]
	return s, ok
}

// updateKind is what kind of update the source sent.
type updateKind struct{ full, reset bool }

// kindsSince returns the kinds of the updates after the first n.
func (r *running) kindsSince(n int) []updateKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.kinds[min(n, len(r.kinds)):])
}

// resets counts the updates marked Reset.
func (r *running) resets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.kinds {
		if k.reset {
			n++
		}
	}
	return n
}

// removals counts the services removed, or served with fewer endpoints
// than before, by the updates so far.
func (r *running) removals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removed
}

func (r *running) updateCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.updates
}

// patience bounds every wait of these tests for something the source must
// do (a first sync, a change reaching the served state, a watch taking its
// connection): the project's shared failure detector, so that a loaded
// machine fails no test. A test asserts that the outcome arrives, in
// order; how fast is the benchmarks' to measure, and the tests log what
// they see.
const patience = bridgetest.Patience

// waitFor polls cond until it holds or within passes; it returns how long
// it took.
func (r *running) waitFor(within time.Duration, what string, cond func() bool) time.Duration {
	r.t.Helper()
	return waitFor(r.t, within, what, cond)
}

func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		<-tick.C
	}
	return time.Since(start)
}

// synced waits for the first Full update.
func (r *running) synced(within time.Duration) {
	r.t.Helper()
	r.waitFor(within, "first sync", func() bool { return r.updateCount() > 0 })
}

// endpointsOf returns the endpoints of cluster name keyed by port (tests
// give each instance its own port).
func (r *running) endpointsOf(name string) map[uint32]sources.Endpoint {
	s, ok := r.service(name)
	if !ok {
		return nil
	}
	m := map[uint32]sources.Endpoint{}
	for _, e := range s.Endpoints {
		m[e.Port] = e
	}
	return m
}

// logRecorder keeps the messages and levels of every record logged.
type logRecorder struct {
	mu     sync.Mutex
	msgs   []string
	levels []slog.Level
}

// records counts the records logged at level or above.
func (l *logRecorder) records(level slog.Level) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, lv := range l.levels {
		if lv >= level {
			n++
		}
	}
	return n
}

// since returns the messages of the records logged at level or above
// after the first n of them (as records counted them), for a failure's
// report.
func (l *logRecorder) since(level slog.Level, n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	seen := 0
	for i, lv := range l.levels {
		if lv < level {
			continue
		}
		if seen++; seen > n {
			out = append(out, lv.String()+" "+l.msgs[i])
		}
	}
	return out
}

func (l *logRecorder) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

type teeHandler struct {
	slog.Handler
	rec *logRecorder
}

func (h teeHandler) Handle(ctx context.Context, rec slog.Record) error {
	h.rec.mu.Lock()
	h.rec.msgs = append(h.rec.msgs, rec.Message)
	h.rec.levels = append(h.rec.levels, rec.Level)
	h.rec.mu.Unlock()
	if !h.Handler.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, rec)
}

func (h teeHandler) Enabled(context.Context, slog.Level) bool { return true }

// register registers an instance through the agent API.
func register(t testing.TB, c *api.Client, reg *api.AgentServiceRegistration) {
	t.Helper()
	if err := c.Agent().ServiceRegister(reg); err != nil {
		t.Fatalf("registering %s: %v", reg.ID, err)
	}
}

func deregister(t testing.TB, c *api.Client, id string) {
	t.Helper()
	if err := c.Agent().ServiceDeregister(id); err != nil {
		t.Fatalf("deregistering %s: %v", id, err)
	}
}
