package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// reconfigureTo reconfigures m to next, failing the test on an error.
func reconfigureTo(t *testing.T, m *Manager, next ...Named) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := m.Reconfigure(ctx, next); err != nil {
		t.Fatal(err)
	}
}

// changed returns the entry of a changed source called name, run by the
// fake f.
func changed(name string, f *fakeSource, startup Startup) Named {
	return Named{Name: name, Source: f, Status: sources.NewStatus(name), Startup: startup}
}

// noRemovals fails if any publish so far removed a service.
func noRemovals(t *testing.T, rec *publishRecorder) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, c := range rec.got {
		if len(c.Removed) > 0 {
			t.Errorf("publish #%d removed %v", i, c.Removed)
		}
	}
}

// phase returns the startup phase /sources shows for source i.
func phase(m *Manager, i int) string { return m.Statuses()[i].Startup }

// TestReplaceMakeBeforeBreak checks that a changed source's services stay
// served, its previous instance's changes included, until the new instance
// syncs; that the new instance's first update publishes only what differs;
// and that a source the same reconfiguration removes loses its services.
func TestReplaceMakeBeforeBreak(t *testing.T) {
	var logs testLog
	hour := Startup{Timeout: time.Hour}
	m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond, Logger: logs.logger()},
		Named{Name: "a", Startup: hour}, Named{Name: "b"}, Named{Name: "c"})
	old := fakes[0]
	old.send(t, fullUp(testSvc("web", "10.0.0.1"), testSvc("api", "10.0.0.2")))
	fakes[1].send(t, fullUp(testSvc("other", "10.0.1.1")))
	fakes[2].send(t, fullUp(testSvc("only-c", "10.0.2.1")))
	rec.wait(t, 0)

	next := newFake()
	entry := changed("a", next, hour)
	reconfigureTo(t, m, entry, Named{Name: "b"})
	expectPublish(t, rec, 1, Changes{Removed: []string{"only-c"}})
	if got := m.Sources()[0]; got.Status != entry.Status || phase(m, 0) != PhaseReplacing {
		t.Errorf("source a: status %p (want the new instance's %p), phase %q, want %q", got.Status, entry.Status, phase(m, 0), PhaseReplacing)
	}
	// The previous instance still serves, changes included.
	web := testSvc("web", "10.0.0.9")
	old.send(t, upsertUp(web))
	expectPublish(t, rec, 2, Changes{Upserted: []sources.Service{web}})

	// The new instance's first update replaces the previous state: only
	// the difference is published, and the previous instance stops.
	api := testSvc("api", "10.0.0.3")
	next.send(t, fullUp(web, api))
	expectPublish(t, rec, 3, Changes{Upserted: []sources.Service{api}})
	waitUntil(t, "the previous instance to stop", func() bool { return old.exits.Load() == 1 })
	if p := phase(m, 0); p != PhaseSynced {
		t.Errorf("phase after the new instance synced = %q", p)
	}
	next.send(t, removeUp("api"))
	expectPublish(t, rec, 4, Changes{Removed: []string{"api"}})
	logs.want(t, "level=INFO", "source=a", "starting its new instance beside the previous one")
	logs.want(t, "level=INFO", "source synced", "source=a", "was=replacing")
}

// TestReplaceFirstUpdateGuarded checks that the new instance's first update
// is judged by the source's removal guard like any other update: a new
// instance that reads an empty registry does not empty the source.
func TestReplaceFirstUpdateGuarded(t *testing.T) {
	four := []sources.Service{testSvc("s1", "10.0.0.1"), testSvc("s2", "10.0.0.2"), testSvc("s3", "10.0.0.3"), testSvc("s4", "10.0.0.4")}
	m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond}, Named{Name: "a", Guard: defaultGuard}, Named{Name: "sentinel"})
	fakes[0].send(t, fullUp(four...))
	fakes[1].send(t, fullUp())
	rec.wait(t, 0)
	next := newFake()
	entry := changed("a", next, Startup{})
	entry.Guard = defaultGuard
	reconfigureTo(t, m, entry, Named{Name: "sentinel"})
	next.send(t, fullUp())
	waitUntil(t, "a hold", func() bool { return m.Statuses()[0].Guard != nil })
	quiet(t, fakes[1], rec, 1, "mark")
	noRemovals(t, rec)
}

// TestReplaceTimesOutFromTheReload checks, on the bubble's clock, that a
// changed source's new instance gets its whole startup timeout counted
// from the reconfiguration (the bridge ran for longer than that before),
// that the previous instance serves meanwhile, and that at the timeout the
// previous instance stops while its last services stay served, stale,
// with the new instance's error shown, until the new one syncs.
func TestReplaceTimesOutFromTheReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 10 * time.Second
		startup := Startup{Timeout: timeout}
		m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond}, Named{Name: "dns", Startup: startup})
		old := fakes[0]
		web := testSvc("web", "10.0.0.1")
		old.send(t, fullUp(web))
		expectPublish(t, rec, 0, Changes{Upserted: []sources.Service{web}})
		time.Sleep(time.Minute)

		next := newFake()
		entry := changed("dns", next, startup)
		entry.Status.Failed(errors.New("read udp 127.0.0.1:53: connection refused"))
		reconfigureTo(t, m, entry)
		time.Sleep(timeout - time.Millisecond)
		synctest.Wait()
		if p, exits := phase(m, 0), old.exits.Load(); p != PhaseReplacing || exits != 0 {
			t.Fatalf("just before the timeout: phase %q, previous instance exited %d times; want replacing and running", p, exits)
		}
		web2 := testSvc("web", "10.0.0.2")
		old.send(t, upsertUp(web2))
		expectPublish(t, rec, 1, Changes{Upserted: []sources.Service{web2}})

		time.Sleep(time.Millisecond)
		synctest.Wait()
		s := m.Statuses()[0]
		if s.Startup != PhaseTimedOut || !s.Stale || !strings.Contains(s.LastError, "connection refused") || old.exits.Load() != 1 {
			t.Fatalf("at the timeout: %+v, previous instance exited %d times; want timed_out, stale, the new instance's error, stopped", s, old.exits.Load())
		}
		if n := rec.count(); n != 2 {
			t.Fatalf("%d publishes after the timeout, want 2: the previous state stays", n)
		}
		web3 := testSvc("web", "10.0.0.3")
		entry.Status.Succeeded() // as a source does on a good read
		next.send(t, fullUp(web3))
		expectPublish(t, rec, 2, Changes{Upserted: []sources.Service{web3}})
		if s := m.Statuses()[0]; s.Startup != PhaseSynced || s.Stale {
			t.Errorf("after the new instance synced: %+v", s)
		}
		noRemovals(t, rec)
	})
}

// TestReplaceBeforeTheGateOpens checks, on the bubble's clock, that a
// source changed before its first sync gets its startup timeout counted
// from the change: the readiness gate waits for it that long.
func TestReplaceBeforeTheGateOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 10 * time.Second
		startup := Startup{Timeout: timeout}
		began := time.Now()
		m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond},
			Named{Name: "slow", Startup: startup}, Named{Name: "file"})
		other := testSvc("other", "10.0.1.1")
		fakes[1].send(t, fullUp(other))
		time.Sleep(8 * time.Second)
		next := newFake()
		reconfigureTo(t, m, changed("slow", next, startup), Named{Name: "file"})
		expectPublish(t, rec, 0, Changes{Upserted: []sources.Service{other}})
		if at := rec.when(0).Sub(began); at != 18*time.Second {
			t.Errorf("the gate opened %v after the start, want 18s: the changed source's timeout counts from the change at 8s", at)
		}
		if p := phase(m, 0); p != PhaseTimedOut || fakes[0].exits.Load() != 1 {
			t.Errorf("phase %q, first instance exited %d times", p, fakes[0].exits.Load())
		}
	})
}

// TestReplaceRequiredWaits checks that a required source has no timeout:
// its previous instance serves until the new one syncs.
func TestReplaceRequiredWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		required := Startup{Timeout: time.Second, Required: true}
		m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond}, Named{Name: "a", Startup: required})
		fakes[0].send(t, fullUp(testSvc("web", "10.0.0.1")))
		rec.wait(t, 0)
		next := newFake()
		reconfigureTo(t, m, changed("a", next, required))
		time.Sleep(time.Hour)
		synctest.Wait()
		if p, exits := phase(m, 0), fakes[0].exits.Load(); p != PhaseReplacing || exits != 0 {
			t.Fatalf("an hour later: phase %q, previous instance exited %d times", p, exits)
		}
		next.send(t, fullUp(testSvc("web", "10.0.0.1")))
		synctest.Wait()
		if p, exits := phase(m, 0), fakes[0].exits.Load(); p != PhaseSynced || exits != 1 {
			t.Errorf("after the new instance synced: phase %q, previous instance exited %d times", p, exits)
		}
		noRemovals(t, rec)
	})
}

// TestReplaceStorm reconfigures a source 1,000 times between two
// configurations while its previous instance keeps reporting changes: no
// service is ever removed, no more than two instances run at once, a
// change back to the configuration in force starts nothing, and the last
// instance to sync takes over.
func TestReplaceStorm(t *testing.T) {
	hour := Startup{Timeout: time.Hour}
	m, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond}, Named{Name: "a", Startup: hour, Spec: "A"})
	served := fakes[0]
	api := testSvc("api", "10.0.0.2")
	served.send(t, fullUp(testSvc("web", "10.0.0.1"), api))
	rec.wait(t, 0)
	instances := []*fakeSource{served}
	running := func() (n int32) {
		for _, f := range instances {
			n += f.runs.Load() - f.exits.Load()
		}
		return n
	}
	published := 1
	webAddr := "10.0.0.1"
	for i := range 1000 {
		f := newFake()
		instances = append(instances, f)
		entry := changed("a", f, hour)
		entry.Spec = []string{"B", "A"}[i%2]
		reconfigureTo(t, m, entry)
		waitUntil(t, "at most two instances running", func() bool { return running() <= 2 })
		if i%100 == 0 {
			webAddr = fmt.Sprintf("10.0.1.%d", i/100)
			web := testSvc("web", webAddr)
			served.send(t, upsertUp(web))
			expectPublish(t, rec, published, Changes{Upserted: []sources.Service{web}})
			published++
		}
	}
	// The storm ended on A, the configuration in force: the same instance
	// serves, and only the 500 changes to B ever started an instance.
	if p := phase(m, 0); p != PhaseSynced || served.exits.Load() != 0 {
		t.Fatalf("after the storm: phase %q, the serving instance exited %d times", p, served.exits.Load())
	}
	// An instance stopped before its goroutine ran still runs once, with
	// its context done: the count settles.
	var started, exited int32
	waitUntil(t, "501 instances started (the first and one per change to B), all but the serving one exited", func() bool {
		started, exited = 0, 0
		for _, f := range instances {
			started, exited = started+f.runs.Load(), exited+f.exits.Load()
		}
		return started == 501 && exited == 500
	})
	last := newFake()
	entry := changed("a", last, hour)
	entry.Spec = "B"
	reconfigureTo(t, m, entry)
	// An update hands its services over: the same content, fresh copies.
	last.send(t, fullUp(testSvc("web", webAddr), testSvc("api", "10.0.0.2")))
	waitUntil(t, "the last instance to take over", func() bool { return served.exits.Load() == 1 && phase(m, 0) == PhaseSynced })
	quietAfter := testSvc("api", "10.0.0.3")
	last.send(t, upsertUp(quietAfter))
	expectPublish(t, rec, published, Changes{Upserted: []sources.Service{quietAfter}})
	noRemovals(t, rec)
}
