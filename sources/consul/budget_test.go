package consul

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// TestAgentBudgetShares: instances of one agent that know their want
// share its budget evenly (never more than one wants, never less than its
// floor), are told when their share changes, get it back when the others
// leave, and leave nothing behind in the register; another agent's
// budget is apart.
func TestAgentBudgetShares(t *testing.T) {
	reg := &agentBudgets{agents: map[string]*agentBudget{}}
	old := reg.join("http://a:8500", 5)
	old.setWant(150)
	if got := old.current(); got != (share{}) {
		t.Fatalf("alone: share %+v, want the zero share (plan alone)", got)
	}
	drain(old)
	other := reg.join("http://b:8500", 5)
	other.setWant(150)
	next := reg.join("http://a:8500", 5)
	next.setWant(150)
	if !told(old) {
		t.Error("the first instance was not told that its share changed")
	}
	if got, want := old.current(), (share{conns: 75, of: 2}); got != want {
		t.Errorf("first instance's share %+v, want %+v", got, want)
	}
	if got, want := next.current(), (share{conns: 75, of: 2}); got != want {
		t.Errorf("second instance's share %+v, want %+v", got, want)
	}
	if got := other.current(); got != (share{}) {
		t.Errorf("the other agent's instance has share %+v, want the zero share", got)
	}
	next.setWant(20)
	if got, want := next.current(), (share{conns: 20, of: 2}); got != want {
		t.Errorf("an instance wanting 20 gets %+v, want %+v", got, want)
	}
	third := reg.join("http://a:8500", 60)
	third.setWant(150)
	if got, want := third.current(), (share{conns: 60, of: 3}); got != want {
		t.Errorf("an instance whose floor is over an even share gets %+v, want %+v", got, want)
	}
	third.leave()
	drain(old)
	next.leave()
	if !told(old) {
		t.Error("the remaining instance was not told that its share grew")
	}
	if got := old.current(); got != (share{}) {
		t.Errorf("alone again: share %+v, want the zero share", got)
	}
	old.leave()
	other.leave()
	if n := len(reg.agents); n != 0 {
		t.Errorf("%d budgets left in the register after every instance left", n)
	}
}

// TestAgentBudgetUnknownWant: an instance that joined but does not know
// its want yet (one that fails before it reached the agent, and is
// restarted again and again, or one whose token the agent refuses) takes
// nothing from the others: their shares do not change when it joins or
// leaves. Only when its dial finds no room does it claim its floor, which
// the others leave it; once it knows its want the budget is split evenly.
func TestAgentBudgetUnknownWant(t *testing.T) {
	reg := &agentBudgets{agents: map[string]*agentBudget{}}
	const key, size, floor = "http://a:8500", 150, 5
	old := reg.join(key, floor)
	old.setWant(size)
	for i := range 3 {
		broken := reg.join(key, floor)
		if got := old.current(); got != (share{}) {
			t.Errorf("start %d of an instance that never learns its want: the healthy instance's share is %+v, want the zero share (the whole budget)", i, got)
		}
		broken.leave()
		if told(old) {
			t.Errorf("start %d of an instance that never learns its want made the healthy one plan again", i)
		}
	}
	pair := reg.join(key, floor)
	pair.setWant(size)
	drain(old)
	broken := reg.join(key, floor)
	for _, m := range []*budgetShare{old, pair} {
		if got, want := m.current(), (share{conns: size / 2, of: 2}); got != want {
			t.Errorf("with an instance that does not know its want beside two that do: share %+v, want %+v", got, want)
		}
	}
	broken.leave()
	pair.leave()
	if !told(old) || old.current() != (share{}) {
		t.Errorf("alone again: share %+v (told), want the zero share", old.current())
	}

	// The old instance holds the whole budget; a new one's first dial
	// waits until the old one made room for its floor.
	life := t.Context()
	pipe := func(context.Context, string, string) (net.Conn, error) {
		c, _ := net.Pipe()
		return c, nil
	}
	dial := old.dialer(life, pipe)
	var conns []net.Conn
	for range size {
		c, err := dial(context.Background(), "tcp", "a:8500")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	next := reg.join(key, floor)
	if told(old) {
		t.Error("the old instance was told to plan again before the new one needed room")
	}
	type dialed struct {
		c   net.Conn
		err error
	}
	first := make(chan dialed, 1)
	go func() {
		c, err := next.dialer(life, pipe)(context.Background(), "tcp", "a:8500")
		first <- dialed{c, err}
	}()
	select {
	case <-old.changed:
	case <-time.After(patience):
		t.Fatal("the old instance was not told to make room for the new one's first dial")
	}
	if got, want := old.current(), (share{conns: size - floor, of: 2}); got != want {
		t.Errorf("the old instance's share once the new one claimed its floor: %+v, want %+v", got, want)
	}
	for _, c := range conns[size-floor:] { // the old instance plans again
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	d := <-first
	if d.err != nil {
		t.Fatalf("the new instance's first dial: %v", d.err)
	}
	conns = append(conns, d.c)
	next.setWant(size)
	for _, m := range []*budgetShare{old, next} {
		if got, want := m.current(), (share{conns: size / 2, of: 2}); got != want {
			t.Errorf("both knowing their want: share %+v, want %+v", got, want)
		}
	}
	next.leave()
	old.leave()
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(reg.agents); n != 0 {
		t.Errorf("%d budgets left once every instance left and every connection closed", n)
	}
}

// TestAgentBudgetConnections: the connections of an agent's instances are
// at most its budget; a dial waits for a connection to close, gives up
// when its instance stops, and a budget with open connections stays in
// the register until they close.
func TestAgentBudgetConnections(t *testing.T) {
	reg := &agentBudgets{agents: map[string]*agentBudget{}}
	a := reg.join("http://a:8500", 1)
	a.setWant(2)
	life, stop := context.WithCancel(context.Background())
	defer stop()
	dial := a.dialer(life, func(context.Context, string, string) (net.Conn, error) {
		c, _ := net.Pipe()
		return c, nil
	})
	var conns []net.Conn
	for range 2 {
		c, err := dial(context.Background(), "tcp", "a:8500")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	third := make(chan net.Conn, 1)
	go func() {
		c, err := dial(context.Background(), "tcp", "a:8500")
		if err != nil {
			t.Errorf("the dial waiting for room: %v", err)
		}
		third <- c
	}()
	if err := conns[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := conns[0].Close(); err != nil {
		t.Fatal(err) // a second Close uncounts nothing more
	}
	if conns[0] = <-third; conns[0] == nil {
		t.FailNow()
	}
	reg.mu.Lock()
	held := reg.agents["http://a:8500"].held
	reg.mu.Unlock()
	if held != 2 {
		t.Errorf("%d connections counted, want the budget's 2", held)
	}
	got := make(chan error, 1)
	go func() {
		_, err := dial(context.Background(), "tcp", "a:8500")
		got <- err
	}()
	stop()
	if err := <-got; err == nil {
		t.Error("a dial waiting for room went on after its instance stopped")
	}
	a.leave()
	if len(reg.agents) != 1 {
		t.Error("the budget was forgotten while its connections were open")
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(reg.agents); n != 0 {
		t.Errorf("%d budgets left once the last connection closed", n)
	}
}

// drain forgets a share's pending change notice.
func drain(m *budgetShare) {
	select {
	case <-m.changed:
	default:
	}
}

// told reports whether a change notice is pending.
func told(m *budgetShare) bool {
	select {
	case <-m.changed:
		return true
	default:
		return false
	}
}

// TestReplacementSharesAgentBudget: a reload's replacement runs the new
// instance of a source beside the old one until the new one has synced.
// With more services than the old instance can watch, the old one holds
// its whole budget; the two together hold no more connections than one
// alone, the agent refuses none of them (no 429), neither removes a
// service, and once the old one stops the new one watches as many
// services as one alone.
func TestReplacementSharesAgentBudget(t *testing.T) {
	const services, nodes = 500, 10
	agent := consultest.Start(t)
	registerMany(t, agent.Client(), services, nodes)
	def, err := New(nil, sources.Options{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	alone := def.cfg.plan(false, consulDefaultConnsPerClient)
	var cc connCounter
	var codes statusCounter
	count := func(s *Source) {
		s.dial = cc.dial
		s.wrap = codes.wrap
	}
	cfg := func(maxStale string) map[string]any {
		return map[string]any{"services": map[string]any{"include": []any{"scale-*"}}, "max_stale": maxStale}
	}
	old := startSource(t, agent, cfg("5s"), count)
	old.synced(2 * patience)
	old.waitFor(patience, "the old instance watching as many services as it can", old.watching(alone.capacity(), services))
	held, _, _ := cc.figures()

	next := startSource(t, agent, cfg("10s"), count)
	next.synced(2 * patience)
	if err := old.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the old instance's Run returned %v", err)
	}
	next.waitFor(patience, "the new instance watching as many services as one alone", next.watching(alone.capacity(), services))

	_, maxOpen, dialed := cc.figures()
	t.Logf("connections: the old instance alone held %d; at most %d open at once during the replacement (budget %d), %d dialed; responses %v",
		held, maxOpen, alone.budget, dialed, codes.snapshot())
	if maxOpen > alone.budget {
		t.Errorf("the two instances held %d connections at once, more than one alone may (%d)", maxOpen, alone.budget)
	}
	if n := codes.count(http.StatusTooManyRequests); n != 0 {
		t.Errorf("the agent answered 429 (too many connections) %d times", n)
	}
	if n := old.removals() + next.removals(); n != 0 {
		t.Errorf("%d services removed or emptied", n)
	}

	// Once no instance uses the agent and its last connection closed,
	// the process keeps nothing of its budget.
	if err := next.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the new instance's Run returned %v", err)
	}
	key := next.src.cfg.agentKey()
	waitFor(t, patience, "the agent's budget forgotten", func() bool {
		budgets.mu.Lock()
		defer budgets.mu.Unlock()
		return budgets.agents[key] == nil
	})
	if open, _, _ := cc.figures(); open != 0 {
		t.Errorf("%d connections open after both instances stopped", open)
	}
}
