package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/sources"
)

// patience bounds every wait of these tests. It is a failure detector, not
// a measurement: a loaded machine must never reach it. (In a synctest
// bubble it is on the bubble's clock and costs no real time.)
const patience = 30 * time.Second

// fakeSource is driven by the test: what arrives on feed is sent upstream,
// and an error on fail makes Run return it.
type fakeSource struct {
	feed chan sources.Update
	fail chan error
	// runs counts the calls of Run, exits those that returned.
	runs, exits atomic.Int32
}

func newFake() *fakeSource {
	return &fakeSource{feed: make(chan sources.Update), fail: make(chan error)}
}

func (f *fakeSource) Run(ctx context.Context, up chan<- sources.Update) error {
	f.runs.Add(1)
	defer f.exits.Add(1)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-f.fail:
			return err
		case u := <-f.feed:
			select {
			case up <- u:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

var _ sources.Source = (*fakeSource)(nil)

func (f *fakeSource) send(t *testing.T, u sources.Update) {
	t.Helper()
	select {
	case f.feed <- u:
	case <-time.After(patience):
		t.Fatal("source was not running to take the update")
	}
}

// recorder collects what the manager publishes, and when.
type publishRecorder struct {
	mu  sync.Mutex
	got []Changes
	at  []time.Time
}

func (r *publishRecorder) publish(c Changes) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, svc := range c.Upserted {
		if strings.HasPrefix(svc.Name, "bad") && c.Failed != nil {
			c.Failed(svc.Name, errors.New("cannot translate"))
		}
	}
	r.got = append(r.got, c)
	r.at = append(r.at, time.Now())
}

// when returns the time of publish number n, which has been made.
func (r *publishRecorder) when(n int) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at[n]
}

func (r *publishRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// wait returns publish number n (0-based), failing after a deadline.
func (r *publishRecorder) wait(t *testing.T, n int) Changes {
	t.Helper()
	var c Changes
	waitUntil(t, fmt.Sprintf("publish #%d", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.got) > n {
			c = r.got[n]
			return true
		}
		return false
	})
	return c
}

// waitUntil polls cond until it holds, failing after patience.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// startManager runs a manager over fakes called names and stops it, and
// checks for leaked goroutines, when the test ends.
func startManager(t *testing.T, opts Options, names ...string) (*Manager, []*fakeSource, *publishRecorder) {
	t.Helper()
	named := make([]Named, len(names))
	for i, n := range names {
		named[i] = Named{Name: n}
	}
	return startNamed(t, opts, named...)
}

// startNamed is startManager for sources with startup and guard settings: each gets a fake
// source and a status.
func startNamed(t *testing.T, opts Options, named ...Named) (*Manager, []*fakeSource, *publishRecorder) {
	t.Helper()
	// A test in a synctest bubble has the bubble's own goroutines around it.
	t.Cleanup(func() {
		goleak.VerifyNone(t, goleak.IgnoreTopFunction("internal/synctest.Run"),
			goleak.IgnoreTopFunction("testing/synctest.testingSynctestTest"))
	})
	fakes := make([]*fakeSource, len(named))
	for i, n := range named {
		fakes[i] = newFake()
		n.Source, n.Status = fakes[i], sources.NewStatus(n.Name)
		opts.Sources = append(opts.Sources, n)
	}
	m := NewManager(opts)
	m.restartMin, m.restartMax = 5*time.Millisecond, 20*time.Millisecond
	rec := &publishRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, rec.publish) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(patience):
			t.Error("Run did not return after cancel")
		}
	})
	return m, fakes, rec
}

func testSvc(name string, addrs ...string) sources.Service {
	s := sources.Service{Name: name}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, sources.Endpoint{Address: a, Port: 80, Health: sources.HealthHealthy})
	}
	return s
}

func fullUp(ss ...sources.Service) sources.Update { return sources.Update{Full: true, Services: ss} }

func upsertUp(ss ...sources.Service) sources.Update { return sources.Update{Services: ss} }

func removeUp(names ...string) sources.Update { return sources.Update{Removed: names} }

func changesString(c Changes) string {
	var b strings.Builder
	for _, s := range c.Upserted {
		fmt.Fprintf(&b, "+%s[", s.Name)
		for i, e := range s.Endpoints {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s:%d", e.Address, e.Port)
		}
		b.WriteString("] ")
	}
	for _, n := range c.Removed {
		fmt.Fprintf(&b, "-%s ", n)
	}
	return strings.TrimSpace(b.String())
}

func equalChanges(a, b Changes) bool {
	return slices.EqualFunc(a.Upserted, b.Upserted, sources.Service.Equal) && slices.Equal(a.Removed, b.Removed)
}

// step is one action of a manager scenario.
type scenarioStep struct {
	src  int            // which source acts (index into the case's sources)
	up   sources.Update // what it sends
	fail bool           // instead of sending, its Run returns an error
	want *Changes       // the next publish; nil means none
	// pending, when set, is what Pending must report after the step.
	pending []string
}

func TestManagerScenarios(t *testing.T) {
	tests := []struct {
		name    string
		sources []string
		steps   []scenarioStep
	}{
		{
			name:    "first publish waits for every source",
			sources: []string{"a", "b"},
			steps: []scenarioStep{
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1")), pending: []string{"b"}},
				{src: 1, up: fullUp(testSvc("api", "10.0.0.2")), pending: []string{},
					want: &Changes{Upserted: []sources.Service{testSvc("api", "10.0.0.2"), testSvc("web", "10.0.0.1")}}},
			},
		},
		{
			name:    "first publish carries an empty state",
			sources: []string{"a"},
			steps:   []scenarioStep{{src: 0, up: fullUp(), want: &Changes{}, pending: []string{}}},
		},
		{
			name:    "non-full first update counts as full",
			sources: []string{"a"},
			steps:   []scenarioStep{{src: 0, up: upsertUp(testSvc("web", "10.0.0.1")), want: &Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.1")}}}},
		},
		{
			name:    "full update removes absent services",
			sources: []string{"a"},
			steps: []scenarioStep{
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1"), testSvc("api", "10.0.0.2")),
					want: &Changes{Upserted: []sources.Service{testSvc("api", "10.0.0.2"), testSvc("web", "10.0.0.1")}}},
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1")), want: &Changes{Removed: []string{"api"}}},
			},
		},
		{
			name:    "partial updates upsert and remove",
			sources: []string{"a"},
			steps: []scenarioStep{
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1"), testSvc("api", "10.0.0.2")),
					want: &Changes{Upserted: []sources.Service{testSvc("api", "10.0.0.2"), testSvc("web", "10.0.0.1")}}},
				{src: 0, up: sources.Update{Services: []sources.Service{testSvc("web", "10.0.0.1", "10.0.0.3")}, Removed: []string{"api"}},
					want: &Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.1", "10.0.0.3")}, Removed: []string{"api"}}},
				{src: 0, up: removeUp("nonexistent")},
				{src: 0, up: upsertUp(testSvc("db", "10.0.0.9")), want: &Changes{Upserted: []sources.Service{testSvc("db", "10.0.0.9")}}},
			},
		},
		{
			name:    "earlier source wins and a later one shows through",
			sources: []string{"a", "b"},
			steps: []scenarioStep{
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1"))},
				{src: 1, up: fullUp(testSvc("web", "10.0.1.1"), testSvc("api", "10.0.1.2")),
					want: &Changes{Upserted: []sources.Service{testSvc("api", "10.0.1.2"), testSvc("web", "10.0.0.1")}}},
				{src: 1, up: upsertUp(testSvc("web", "10.0.1.5"))},
				{src: 0, up: removeUp("web"), want: &Changes{Upserted: []sources.Service{testSvc("web", "10.0.1.5")}}},
				{src: 0, up: upsertUp(testSvc("web", "10.0.0.1")), want: &Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.1")}}},
				{src: 1, up: fullUp(testSvc("api", "10.0.1.2"))},
				{src: 0, up: fullUp(), want: &Changes{Removed: []string{"web"}}},
				// An identical copy showing through is no change.
				{src: 1, up: upsertUp(testSvc("web", "10.0.2.1")), want: &Changes{Upserted: []sources.Service{testSvc("web", "10.0.2.1")}}},
				{src: 0, up: upsertUp(testSvc("web", "10.0.2.1"))},
				{src: 0, up: removeUp("web")},
			},
		},
		{
			name:    "unchanged content publishes nothing",
			sources: []string{"a"},
			steps: []scenarioStep{
				{src: 0, up: fullUp(testSvc("web", "10.0.0.2", "10.0.0.1")),
					want: &Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.1", "10.0.0.2")}}},
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1", "10.0.0.2"))},
				{src: 0, up: upsertUp(testSvc("web", "10.0.0.2", "10.0.0.1"))},
			},
		},
		{
			name:    "empty service is a state, not a removal",
			sources: []string{"a"},
			steps: []scenarioStep{
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1")), want: &Changes{Upserted: []sources.Service{testSvc("web", "10.0.0.1")}}},
				{src: 0, up: upsertUp(testSvc("web")), want: &Changes{Upserted: []sources.Service{testSvc("web")}}},
				{src: 0, up: fullUp(testSvc("web"))},
				{src: 0, up: removeUp("web"), want: &Changes{Removed: []string{"web"}}},
				{src: 0, up: upsertUp(testSvc("web")), want: &Changes{Upserted: []sources.Service{testSvc("web")}}},
			},
		},
		{
			name:    "failed source restarts and keeps its state",
			sources: []string{"a"},
			steps: []scenarioStep{
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1"), testSvc("api", "10.0.0.2")),
					want: &Changes{Upserted: []sources.Service{testSvc("api", "10.0.0.2"), testSvc("web", "10.0.0.1")}}},
				{src: 0, fail: true, pending: []string{}},
				{src: 0, up: fullUp(testSvc("web", "10.0.0.1"), testSvc("api", "10.0.0.2"), testSvc("db", "10.0.0.3")),
					want: &Changes{Upserted: []sources.Service{testSvc("db", "10.0.0.3")}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A last source, "sentinel", proves that a step published
			// nothing: it adds a fresh service, and the next publish must
			// carry that alone.
			names := append(slices.Clone(tt.sources), "sentinel")
			m, fakes, rec := startManager(t, Options{Holdoff: 10 * time.Millisecond, MaxHoldoff: 100 * time.Millisecond}, names...)
			sentinel := fakes[len(fakes)-1]
			sentinel.send(t, fullUp())
			next := 0
			for i, st := range tt.steps {
				f := fakes[st.src]
				if st.fail {
					runs := f.runs.Load()
					f.fail <- errors.New("registry went away")
					waitUntil(t, "restart", func() bool { return f.runs.Load() > runs })
					if s := m.opts.Sources[st.src].snapshot(); !s.Stale || !strings.Contains(s.LastError, "registry went away") {
						t.Errorf("step %d: status after failure = %+v, want stale with the error", i, s)
					}
				} else {
					f.send(t, st.up)
				}
				if st.pending != nil {
					waitUntil(t, fmt.Sprintf("step %d: Pending() = %q", i, st.pending), func() bool {
						return slices.Equal(m.Pending(), st.pending)
					})
				}
				switch {
				case st.want != nil:
					if got := rec.wait(t, next); !equalChanges(got, *st.want) {
						t.Fatalf("step %d: published %q, want %q", i, changesString(got), changesString(*st.want))
					}
					next++
				case next == 0:
					// Nothing can be published before every source synced;
					// Pending above proved the update was applied.
					if n := rec.count(); n != 0 {
						t.Fatalf("step %d: %d publishes before every source synced", i, n)
					}
				default:
					mark := testSvc(fmt.Sprintf("~mark%d", i), "10.9.9.9")
					sentinel.send(t, upsertUp(mark))
					want := Changes{Upserted: []sources.Service{mark}}
					if got := rec.wait(t, next); !equalChanges(got, want) {
						t.Fatalf("step %d: published %q, want nothing (only the sentinel %q)", i, changesString(got), changesString(want))
					}
					next++
				}
			}
		})
	}
}

func TestManagerHoldoffCoalescesBurst(t *testing.T) {
	// In a bubble the clock moves only when every goroutine waits, so the
	// burst below, sent back to back, is never split by a loaded machine.
	synctest.Test(t, func(t *testing.T) {
		_, fakes, rec := startManager(t, Options{Holdoff: 500 * time.Millisecond, MaxHoldoff: 10 * time.Second}, "a")
		fakes[0].send(t, fullUp())
		rec.wait(t, 0)
		var want Changes
		for i := range 5 {
			s := testSvc(fmt.Sprintf("s%d", i), "10.0.0.1")
			fakes[0].send(t, upsertUp(s))
			want.Upserted = append(want.Upserted, s)
		}
		if got := rec.wait(t, 1); !equalChanges(got, want) {
			t.Fatalf("published %q, want the whole burst %q at once", changesString(got), changesString(want))
		}
	})
}

// TestManagerHoldoffAfterQuiet checks the loop's use of Cadence: a burst
// that comes after a quiet period, whether the previous publish was the
// first one or a batch, waits one holdoff and goes out as one publish. A
// publish not reported finished to the cadence would make the first change
// of each such burst due at once, alone.
func TestManagerHoldoffAfterQuiet(t *testing.T) {
	// In a bubble the clock moves only when every goroutine waits, so the
	// quiet period costs no real time and a burst sent back to back is
	// never split by a loaded machine.
	synctest.Test(t, func(t *testing.T) {
		const holdoff = 500 * time.Millisecond
		_, fakes, rec := startManager(t, Options{Holdoff: holdoff}, "a")
		fakes[0].send(t, fullUp())
		rec.wait(t, 0)
		for n := 1; n <= 2; n++ {
			time.Sleep(holdoff + 100*time.Millisecond) // the quiet period itself
			var want Changes
			for i := range 5 {
				s := testSvc(fmt.Sprintf("s%d-%d", n, i), "10.0.0.1")
				fakes[0].send(t, upsertUp(s))
				want.Upserted = append(want.Upserted, s)
			}
			if got := rec.wait(t, n); !equalChanges(got, want) {
				t.Fatalf("publish #%d = %q, want the whole burst %q at once", n, changesString(got), changesString(want))
			}
		}
	})
}

func TestManagerPublishesDuringStream(t *testing.T) {
	// Changes arrive far faster than the holdoff; the batch still closes
	// one holdoff after the previous publish while the stream goes on. On
	// the bubble's clock that is exact, whatever the machine's load.
	synctest.Test(t, func(t *testing.T) {
		const holdoff, maxHoldoff = 400 * time.Millisecond, 600 * time.Millisecond
		_, fakes, rec := startManager(t, Options{Holdoff: holdoff, MaxHoldoff: maxHoldoff}, "a")
		fakes[0].send(t, fullUp())
		rec.wait(t, 0)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer wg.Wait()
		defer close(stop)
		wg.Go(func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case fakes[0].feed <- upsertUp(testSvc("web", fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))):
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
		got := rec.wait(t, 1)
		if gap := rec.when(1).Sub(rec.when(0)); gap != holdoff {
			t.Errorf("the stream's first publish came %v after the previous one, want one holdoff (%v)", gap, holdoff)
		}
		if len(got.Upserted) != 1 || got.Upserted[0].Name != "web" {
			t.Errorf("published %q, want web", changesString(got))
		}
	})
}

func TestManagerPendingBeforeRun(t *testing.T) {
	m := NewManager(Options{Sources: []Named{{Name: "a", Source: newFake()}, {Name: "b", Source: newFake()}}})
	if got := m.Pending(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Pending() = %q, want [a b]", got)
	}
}
