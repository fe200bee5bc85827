package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

func names(c Changes) (up, removed string) {
	var u []string
	for _, s := range c.Upserted {
		u = append(u, s.Name)
	}
	return strings.Join(u, ","), strings.Join(c.Removed, ",")
}

// TestReconfigure checks that a kept source keeps running untouched, a new
// one joins, a removed one stops and its services go, a replaced one is
// restarted, and precedence follows the new order.
func TestReconfigure(t *testing.T) {
	m, fakes, rec := startManager(t, Options{Holdoff: time.Millisecond, MaxHoldoff: 5 * time.Millisecond}, "a", "b", "c")
	a, b, c := fakes[0], fakes[1], fakes[2]
	a.send(t, sources.Update{Full: true, Services: []sources.Service{testSvc("shared", "10.0.0.1"), testSvc("only-a", "10.0.0.1")}})
	b.send(t, sources.Update{Full: true, Services: []sources.Service{testSvc("shared", "10.0.0.2"), testSvc("only-b", "10.0.0.2")}})
	c.send(t, sources.Update{Full: true, Services: []sources.Service{testSvc("only-c", "10.0.0.3")}})
	rec.wait(t, 0)
	aStatus := m.Sources()[0].Status

	// b goes first, a is kept, c is removed, d is new.
	d := newFake()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := m.Reconfigure(ctx, []Named{
		{Name: "b"}, {Name: "a"}, {Name: "d", Source: d, Status: sources.NewStatus("d")},
	}); err != nil {
		t.Fatal(err)
	}
	ch := rec.wait(t, 1)
	if up, rm := names(ch); up != "shared" || rm != "only-c" || ch.Upserted[0].Endpoints[0].Address != "10.0.0.2" {
		t.Errorf("publish after reconfigure: upserted %q (%+v), removed %q", up, ch.Upserted, rm)
	}
	if got := m.Sources(); len(got) != 3 || got[1].Status != aStatus || got[2].Name != "d" {
		t.Errorf("sources = %+v", got)
	}
	if a.runs.Load() != 1 || b.runs.Load() != 1 {
		t.Errorf("kept sources restarted: a ran %d times, b %d", a.runs.Load(), b.runs.Load())
	}
	d.send(t, sources.Update{Full: true, Services: []sources.Service{testSvc("only-d", "10.0.0.4")}})
	if up, _ := names(rec.wait(t, 2)); up != "only-d" {
		t.Errorf("new source's services: %q", up)
	}
	// The removed source was stopped: nobody takes its updates any more.
	select {
	case c.feed <- sources.Update{Full: true}:
		t.Error("the removed source still runs")
	case <-time.After(20 * time.Millisecond):
	}
	// a kept source still reports.
	a.send(t, sources.Update{Services: []sources.Service{testSvc("only-a", "10.0.0.9")}})
	if ch := rec.wait(t, 3); ch.Upserted[0].Endpoints[0].Address != "10.0.0.9" {
		t.Errorf("kept source's change: %+v", ch)
	}
	if len(m.Pending()) != 0 {
		t.Errorf("pending = %v after reconfigure", m.Pending())
	}
}

func TestReconfigureRejectedWhole(t *testing.T) {
	m, fakes, rec := startManager(t, Options{Holdoff: time.Millisecond}, "a")
	fakes[0].send(t, sources.Update{Full: true, Services: []sources.Service{testSvc("x", "10.0.0.1")}})
	rec.wait(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for _, next := range [][]Named{
		{{Name: "a"}, {Name: "ghost"}},
		{{Name: "a"}, {Name: "a"}},
		{{Name: "n", Source: newFake()}},
	} {
		if err := m.Reconfigure(ctx, next); err == nil {
			t.Errorf("Reconfigure(%+v) accepted", next)
		}
	}
	if got := m.Sources(); len(got) != 1 || got[0].Name != "a" || fakes[0].runs.Load() != 1 {
		t.Errorf("sources after rejected reconfigurations: %+v", got)
	}
	fakes[0].send(t, sources.Update{Full: true, Services: []sources.Service{testSvc("x", "10.0.0.2")}})
	rec.wait(t, 1)
	if n := rec.count(); n != 2 {
		t.Errorf("%d publishes, want 2", n)
	}
}
