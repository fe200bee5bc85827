package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
)

// expectPublish fails unless publish number n is want.
func expectPublish(t *testing.T, rec *publishRecorder, n int, want Changes) {
	t.Helper()
	if got := rec.wait(t, n); !equalChanges(got, want) {
		t.Fatalf("publish #%d = %q, want %q", n, changesString(got), changesString(want))
	}
}

// quiet proves that source fakes[0]'s last update published nothing: the
// sentinel's next change must be published alone as publish number n.
func quiet(t *testing.T, sentinel *fakeSource, rec *publishRecorder, n int, mark string) {
	t.Helper()
	svc := testSvc(mark, "10.9.9.9")
	sentinel.send(t, upsertUp(svc))
	expectPublish(t, rec, n, Changes{Upserted: []sources.Service{svc}})
}

func TestStartupOptionalSourceTimesOut(t *testing.T) {
	began := time.Now()
	m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond},
		Named{Name: "a"}, Named{Name: "slow", Startup: Startup{Timeout: 100 * time.Millisecond}})
	fakes[0].send(t, fullUp(testSvc("web", "10.0.0.1")))
	expectPublish(t, rec, 0, Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.1")}})
	if took := time.Since(began); took < 100*time.Millisecond {
		t.Errorf("published after %v, before the slow source's timeout", took)
	}
	if p := m.Pending(); len(p) != 0 {
		t.Errorf("Pending() = %q after the gate opened", p)
	}
	snap := m.opts.Sources[1].snapshot()
	if snap.Startup != PhaseTimedOut || !snap.Stale {
		t.Errorf("slow source status = %+v, want timed_out and stale", snap)
	}
	fakes[1].send(t, fullUp(testSvc("api", "10.0.0.2")))
	expectPublish(t, rec, 1, Changes{Upserted: []sources.Service{testSvc("api", "10.0.0.2")}})
	if snap := m.opts.Sources[1].snapshot(); snap.Startup != PhaseSynced || snap.Stale {
		t.Errorf("slow source status after its sync = %+v", snap)
	}
}

func TestStartupGateStaysClosed(t *testing.T) {
	tests := []struct {
		name string
		srcs []Named
		sync []int // sources that sync
	}{
		{"required source", []Named{{Name: "a"}, {Name: "req", Startup: Startup{Timeout: 20 * time.Millisecond, Required: true}}}, []int{0}},
		{"only source timed out", []Named{{Name: "only", Startup: Startup{Timeout: 20 * time.Millisecond}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, fakes, rec := startNamed(t, Options{}, tt.srcs...)
			for _, i := range tt.sync {
				fakes[i].send(t, fullUp())
			}
			last := tt.srcs[len(tt.srcs)-1]
			waitUntil(t, "the timeout to pass", func() bool {
				return m.opts.Sources[len(tt.srcs)-1].snapshot().Startup != PhaseWaiting || last.Startup.Required
			})
			time.Sleep(3 * last.Startup.Timeout) // nothing to wait for: proving an absence
			if rec.count() != 0 || !slices.Equal(m.Pending(), []string{last.Name}) {
				t.Fatalf("published %d times, Pending() = %q; want nothing published, pending %q", rec.count(), m.Pending(), last.Name)
			}
			fakes[len(fakes)-1].send(t, fullUp(testSvc("web", "10.0.0.1")))
			expectPublish(t, rec, 0, Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.1")}})
		})
	}
}

// memStore is a StateDir in memory; loadErr, when set, is the error of
// its Load.
type memStore struct {
	mu      sync.Mutex
	state   map[string][]sources.Service
	loadErr error
	saves   int
}

func (s *memStore) Load() (map[string][]sources.Service, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadErr != nil {
		// What a careless implementation might return beside its
		// error: the manager must not use it.
		return s.state, s.loadErr
	}
	return s.state, nil
}

func (s *memStore) Save(st map[string][]sources.Service) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.saves = st, s.saves+1
	return nil
}

func (s *memStore) get(name string) ([]sources.Service, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state[name], s.saves
}

func TestWarmStart(t *testing.T) {
	// On the bubble's clock the persisted state is served exactly when
	// warmWait ends, long before the source's startup timeout, however
	// loaded the machine.
	synctest.Test(t, func(t *testing.T) {
		store := &memStore{state: map[string][]sources.Service{"consul": {testSvc("web", "10.0.0.1")}}}
		m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond, StateDir: store, SaveInterval: 10 * time.Millisecond},
			Named{Name: "consul", Startup: Startup{Timeout: time.Minute}}, Named{Name: "file"})
		began := time.Now()
		fakes[1].send(t, fullUp(testSvc("api", "10.0.0.2")))
		expectPublish(t, rec, 0, Changes{Upserted: []sources.Service{testSvc("api", "10.0.0.2"), testSvc("web", "10.0.0.1")}})
		if at := rec.when(0).Sub(began); at != warmWait {
			t.Errorf("warm state served %v after the start, want at warmWait (%v)", at, warmWait)
		}
		if snap := m.opts.Sources[0].snapshot(); snap.Startup != PhaseWarm || !snap.Stale {
			t.Errorf("status = %+v, want warm and stale", snap)
		}
		// What was restored is persisted again, with the other source's.
		waitUntil(t, "a save", func() bool { _, n := store.get("file"); return n > 0 })
		if got, _ := store.get("consul"); len(got) != 1 || got[0].Name != "web" {
			t.Errorf("persisted %v for the warm source", got)
		}
		fakes[0].send(t, fullUp(testSvc("web", "10.0.0.3")))
		expectPublish(t, rec, 1, Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.3")}})
		waitUntil(t, "the new state saved", func() bool {
			got, _ := store.get("consul")
			return len(got) == 1 && got[0].Endpoints[0].Address == "10.0.0.3"
		})
	})
}

// TestWarmStartUnreadableState: state the StateDir cannot read is not
// served, even in part; the source waits as without a state directory,
// the reason is logged once and shows in StateDirStatus, and the next
// save writes the state afresh.
func TestWarmStartUnreadableState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		store := &memStore{state: map[string][]sources.Service{"consul": {testSvc("web", "10.0.0.1")}},
			loadErr: errors.New("state.json: corrupt or truncated: unexpected end of JSON input")}
		m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond, StateDir: store, SaveInterval: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))},
			Named{Name: "consul", Startup: Startup{Timeout: time.Minute}}, Named{Name: "file"})
		fakes[1].send(t, fullUp(testSvc("api", "10.0.0.2")))
		// Past warmWait on the bubble's clock: readable state would be
		// served by now, and with it the gate would open.
		time.Sleep(2 * warmWait)
		synctest.Wait()
		if rec.count() != 0 {
			t.Fatalf("published %q before consul synced: its unreadable persisted state was served",
				changesString(rec.wait(t, 0)))
		}
		if snap := m.opts.Sources[0].snapshot(); snap.Startup != PhaseWaiting {
			t.Errorf("consul status = %+v, want waiting: its persisted state could not be read", snap)
		}
		if st := m.StateDirStatus(); st.LoadError != store.loadErr.Error() {
			t.Errorf("StateDirStatus().LoadError = %q, want %q", st.LoadError, store.loadErr)
		}
		if n := strings.Count(logs.String(), "ignoring the persisted state for warm starts"); n != 1 || !strings.Contains(logs.String(), "unexpected end of JSON input") {
			t.Errorf("%d log lines about the unreadable state, want 1 with the reason:\n%s", n, logs.String())
		}
		fakes[0].send(t, fullUp(testSvc("web", "10.0.0.3")))
		expectPublish(t, rec, 0, Changes{Upserted: []sources.Service{testSvc("api", "10.0.0.2"), testSvc("web", "10.0.0.3")}})
		waitUntil(t, "the state saved", func() bool {
			got, _ := store.get("consul")
			return len(got) == 1 && got[0].Endpoints[0].Address == "10.0.0.3"
		})
	})
}

func TestWarmStartNotForRequired(t *testing.T) {
	// Past warmWait on the bubble's clock, with every goroutine idle: a
	// served state would have been published by now.
	synctest.Test(t, func(t *testing.T) {
		store := &memStore{state: map[string][]sources.Service{"consul": {testSvc("web", "10.0.0.1")}}}
		m, _, rec := startNamed(t, Options{StateDir: store}, Named{Name: "consul", Startup: Startup{Required: true}})
		time.Sleep(2 * warmWait)
		synctest.Wait()
		if rec.count() != 0 || m.opts.Sources[0].snapshot().Startup != PhaseWaiting {
			t.Fatalf("a required source's persisted state was served")
		}
	})
}

func TestGuard(t *testing.T) {
	four := []sources.Service{testSvc("s1", "10.0.0.1"), testSvc("s2", "10.0.0.2"), testSvc("s3", "10.0.0.3"), testSvc("s4", "10.0.0.4")}
	guard := Guard{MaxRemovedFraction: 0.5, Hold: 150 * time.Millisecond}
	startWith := func(t *testing.T, guard Guard) (*Manager, []*fakeSource, *publishRecorder) {
		t.Helper()
		m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond},
			Named{Name: "consul", Guard: guard}, Named{Name: "sentinel"})
		fakes[1].send(t, fullUp())
		fakes[0].send(t, fullUp(four...))
		expectPublish(t, rec, 0, Changes{Upserted: four})
		return m, fakes, rec
	}
	start := func(t *testing.T) (*Manager, []*fakeSource, *publishRecorder) {
		t.Helper()
		return startWith(t, guard)
	}
	held := func(t *testing.T, m *Manager) *GuardSnapshot {
		t.Helper()
		return m.opts.Sources[0].snapshot().Guard
	}

	t.Run("emptied source empties after the hold", func(t *testing.T) {
		m, fakes, rec := start(t)
		began := time.Now()
		fakes[0].send(t, fullUp())
		quiet(t, fakes[1], rec, 1, "mark")
		if g := held(t, m); g == nil || g.HeldServices != 4 {
			t.Fatalf("guard status = %+v, want 4 services held", g)
		}
		expectPublish(t, rec, 2, Changes{Removed: []string{"s1", "s2", "s3", "s4"}})
		if took := time.Since(began); took < guard.Hold {
			t.Errorf("removed after %v, before the hold of %v", took, guard.Hold)
		}
		snap := m.opts.Sources[0].snapshot()
		if snap.Guard != nil || snap.GuardHolds != 1 {
			t.Errorf("guard after the hold = %+v, holds %d", snap.Guard, snap.GuardHolds)
		}
	})
	t.Run("refill ends the hold with nothing removed", func(t *testing.T) {
		m, fakes, rec := startWith(t, Guard{MaxRemovedFraction: 0.5, Hold: 5 * time.Second})
		fakes[0].send(t, fullUp(four[0]))
		quiet(t, fakes[1], rec, 1, "mark")
		until := held(t, m).Until
		// Additions flow during the hold; what comes back extends it.
		for i := 2; i <= 3; i++ {
			time.Sleep(5 * time.Millisecond) // lets the clock move on
			fakes[0].send(t, fullUp(append(slices.Clone(four[:i]), testSvc("new", "10.1.1.1"))...))
			if i == 2 {
				expectPublish(t, rec, 2, Changes{Upserted: []sources.Service{testSvc("new", "10.1.1.1")}})
			}
		}
		waitUntil(t, "the hold extended", func() bool { g := held(t, m); return g != nil && g.Until.After(until) && g.HeldServices == 1 })
		fakes[0].send(t, fullUp(append(slices.Clone(four), testSvc("new", "10.1.1.1"))...))
		waitUntil(t, "the hold to end", func() bool { return held(t, m) == nil })
		quiet(t, fakes[1], rec, 3, "mark2")
	})
	t.Run("endpoints of one service, per-service rule", func(t *testing.T) {
		m, fakes, rec := startWith(t, Guard{MaxRemovedFraction: 0.5, MinRemoved: 1, PerService: true, Hold: 150 * time.Millisecond})
		big := testSvc("s1", "10.0.0.1", "10.0.0.5", "10.0.0.6", "10.0.0.7")
		fakes[0].send(t, upsertUp(big))
		expectPublish(t, rec, 1, Changes{Upserted: []sources.Service{big}})
		fakes[0].send(t, upsertUp(testSvc("s1", "10.0.0.1", "10.0.0.8")))
		union := testSvc("s1", "10.0.0.1", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8")
		expectPublish(t, rec, 2, Changes{Upserted: []sources.Service{union}})
		if g := held(t, m); g == nil || g.HeldEndpoints != 3 || !strings.Contains(g.Reason, "s1") {
			t.Fatalf("guard status = %+v, want 3 endpoints of s1 held", g)
		}
		expectPublish(t, rec, 3, Changes{Upserted: []sources.Service{testSvc("s1", "10.0.0.1", "10.0.0.8")}})
	})
	t.Run("small removals apply at once", func(t *testing.T) {
		_, fakes, rec := start(t)
		fakes[0].send(t, fullUp(four[:2]...))
		expectPublish(t, rec, 1, Changes{Removed: []string{"s3", "s4"}})
	})
	t.Run("operator confirms", func(t *testing.T) {
		m, fakes, rec := startWith(t, Guard{MaxRemovedFraction: 0.5, Hold: time.Hour})
		fakes[0].send(t, fullUp())
		quiet(t, fakes[1], rec, 1, "mark")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.ConfirmRemovals(ctx, "nope"); !errors.Is(err, ErrNoSource) {
			t.Errorf("confirming an unknown source: %v, want ErrNoSource", err)
		}
		if err := m.ConfirmRemovals(ctx, "consul"); err != nil {
			t.Fatal(err)
		}
		expectPublish(t, rec, 2, Changes{Removed: []string{"s1", "s2", "s3", "s4"}})
		if err := m.ConfirmRemovals(ctx, "consul"); err == nil || errors.Is(err, ErrNoSource) {
			t.Errorf("confirming without a hold: %v, want an error other than ErrNoSource", err)
		}
	})
}

func TestServiceErrorsShownPerSource(t *testing.T) {
	m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond}, Named{Name: "a"}, Named{Name: "b"})
	fakes[0].send(t, fullUp(testSvc("bad1", "10.0.0.1"), testSvc("web", "10.0.0.2")))
	fakes[1].send(t, fullUp())
	rec.wait(t, 0)
	errs := func(i int) map[string]string { return m.opts.Sources[i].snapshot().ServiceErrors }
	if got := errs(0); len(got) != 1 || got["bad1"] != "cannot translate" {
		t.Errorf("service errors of a = %v", got)
	}
	if got := errs(1); len(got) != 0 {
		t.Errorf("service errors of b = %v", got)
	}
	fakes[0].send(t, removeUp("bad1"))
	rec.wait(t, 1)
	if got := errs(0); len(got) != 0 {
		t.Errorf("service errors of a after the removal = %v", got)
	}
}

func TestPersistRateLimited(t *testing.T) {
	store := &memStore{}
	const every = 300 * time.Millisecond
	_, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond, MaxHoldoff: time.Millisecond,
		StateDir: store, SaveInterval: every}, Named{Name: "a"})
	began := time.Now()
	fakes[0].send(t, fullUp())
	rec.wait(t, 0)
	for i := range 10 {
		fakes[0].send(t, upsertUp(testSvc(fmt.Sprintf("s%d", i), "10.0.0.1")))
		rec.wait(t, i+1)
	}
	waitUntil(t, "the last change saved", func() bool { got, _ := store.get("a"); return len(got) == 10 })
	_, saves := store.get("a")
	if limit := 1 + int(time.Since(began)/every) + 1; saves > limit {
		t.Errorf("%d saves in %v, want at most %d (one per %v)", saves, time.Since(began), limit, every)
	}
}

// TestGuardLetsOrdinaryRemovalsThrough runs the manager with the default
// guard: each ordinary removal is published at once, and no hold starts.
func TestGuardLetsOrdinaryRemovalsThrough(t *testing.T) {
	dns := []sources.Service{testSvc("api", "10.0.0.1", "10.0.0.2", "10.0.0.3"), testSvc("web", "10.0.1.1"), testSvc("db", "10.0.2.1")}
	file := []sources.Service{testSvc("web", "10.0.0.1"), testSvc("api", "10.0.1.1"), testSvc("payments", "10.0.2.1"), testSvc("search", "10.0.3.1")}
	tests := []struct {
		name   string
		before []sources.Service
		up     sources.Update
		want   Changes
	}{
		{"last instance deregistered", file, upsertUp(sources.Service{Name: "api"}),
			Changes{Upserted: []sources.Service{{Name: "api"}}}},
		{"scale-down from four instances to one", []sources.Service{testSvc("web", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")},
			upsertUp(testSvc("web", "10.0.0.1")), Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.1")}}},
		{"one of several names answers NXDOMAIN", dns, upsertUp(sources.Service{Name: "web"}),
			Changes{Upserted: []sources.Service{{Name: "web"}}}},
		{"one SRV target of three dropped", dns, upsertUp(testSvc("api", "10.0.0.1", "10.0.0.3")),
			Changes{Upserted: []sources.Service{testSvc("api", "10.0.0.1", "10.0.0.3")}}},
		{"three of four services deleted from a file", file, fullUp(file[0]),
			Changes{Removed: []string{"api", "payments", "search"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond}, Named{Name: "src", Guard: defaultGuard})
			fakes[0].send(t, fullUp(tt.before...))
			rec.wait(t, 0)
			fakes[0].send(t, tt.up)
			expectPublish(t, rec, 1, tt.want)
			if snap := m.opts.Sources[0].snapshot(); snap.GuardHolds != 0 || snap.Guard != nil {
				t.Errorf("guard status = %+v (holds %d), want no hold", snap.Guard, snap.GuardHolds)
			}
		})
	}
}

// TestGuardReset drives the manager with a source that reports a reset of
// its registry and refills.
func TestGuardReset(t *testing.T) {
	// In a bubble the hold's clock moves only when every goroutine waits,
	// so a loaded machine cannot let the hold expire between two sends.
	synctest.Test(t, func(t *testing.T) {
		const hold = 150 * time.Millisecond
		four := []sources.Service{testSvc("s1", "10.0.0.1"), testSvc("s2", "10.0.0.2"), testSvc("s3", "10.0.0.3"), testSvc("s4", "10.0.0.4")}
		guard := defaultGuard
		guard.Hold = hold
		var logs testLog
		m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond, Logger: logs.logger()},
			Named{Name: "consul", Guard: guard}, Named{Name: "sentinel"})
		fakes[1].send(t, fullUp())
		fakes[0].send(t, fullUp(four...))
		expectPublish(t, rec, 0, Changes{Upserted: four})

		// The reset: an empty catalog plus a new service; the new one flows.
		fresh := testSvc("fresh", "10.0.1.1")
		fakes[0].send(t, sources.Update{Full: true, Reset: true, Services: []sources.Service{fresh}})
		expectPublish(t, rec, 1, Changes{Upserted: []sources.Service{fresh}})
		snap := m.opts.Sources[0].snapshot()
		if g := snap.Guard; g == nil || g.HeldServices != 4 || !strings.Contains(g.Reason, "registry reset") {
			t.Fatalf("guard status = %+v, want 4 services held after the reset", g)
		}
		// The refill: three come back, one of them changed; only the change
		// is published.
		s2 := testSvc("s2", "10.0.0.2", "10.0.0.9")
		fakes[0].send(t, fullUp(fresh, four[0], s2, four[2]))
		expectPublish(t, rec, 2, Changes{Upserted: []sources.Service{s2}})
		// Settled: the one that never came back is removed, and only then.
		expectPublish(t, rec, 3, Changes{Removed: []string{"s4"}})
		if snap := m.opts.Sources[0].snapshot(); snap.Guard != nil || snap.GuardHolds != 1 {
			t.Errorf("guard status after the refill = %+v (holds %d)", snap.Guard, snap.GuardHolds)
		}
		logs.want(t, "level=WARN", "source=consul", "registry reset", `confirm="POST /guard/confirm?source=consul on the admin listener"`, "held_until=")
		logs.want(t, "level=INFO", "removal hold over", "source=consul", "brought nothing back", "removed_services=1")
	})
}

// TestGuardWarmStart checks that a warm source's first real sync goes
// through the guard: persisted services are not dropped by an empty read.
func TestGuardWarmStart(t *testing.T) {
	store := &memStore{state: map[string][]sources.Service{"consul": {testSvc("web", "10.0.0.1"), testSvc("api", "10.0.0.2")}}}
	m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond, StateDir: store},
		Named{Name: "consul", Guard: defaultGuard, Startup: Startup{Timeout: time.Minute}}, Named{Name: "file"})
	fakes[1].send(t, fullUp())
	rec.wait(t, 0)
	fakes[0].send(t, fullUp())
	waitUntil(t, "a hold", func() bool { return m.opts.Sources[0].snapshot().Guard != nil })
	quiet(t, fakes[1], rec, 1, "mark")
}

// testLog collects what a manager logs, in text form.
type testLog struct{ buf syncbuf.Buffer }

func (l *testLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// want fails unless a line contains every one of parts.
func (l *testLog) want(t *testing.T, parts ...string) {
	t.Helper()
	for line := range strings.Lines(l.buf.String()) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return
		}
	}
	t.Errorf("no log line with %q in:\n%s", parts, l.buf.String())
}
