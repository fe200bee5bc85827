package manager

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// slot is one running instance of a source: its place in the precedence
// order (-1 once stopped; only the manager's loop reads or writes idx and
// prev) and how to stop it. prev marks the previous instance of a
// replacement in progress (see replace.go), whose updates are served until
// the new instance has synced.
type slot struct {
	idx    int
	prev   bool
	named  Named
	cancel context.CancelFunc
}

// stop cancels the instance; updates it sent meanwhile are dropped.
func (sl *slot) stop() {
	sl.cancel()
	sl.idx = -1
}

// runState is what Run shares with the loop for starting sources later.
type runState struct {
	ctx    context.Context
	wg     *sync.WaitGroup
	events chan event
	slots  []*slot // in precedence order, the instance in force; owned by the loop
}

// reconfiguration asks the loop to replace the running sources with next.
type reconfiguration struct {
	next []Named
	done chan error
}

// startSource runs n at precedence idx under its own context, so that a
// reconfiguration can stop it alone.
func (m *Manager) startSource(idx int, n Named) *slot {
	ctx, cancel := context.WithCancel(m.run.ctx)
	sl := &slot{idx: idx, named: n, cancel: cancel}
	up := make(chan sources.Update)
	m.run.wg.Go(func() { m.supervise(ctx, n, up) })
	m.run.wg.Go(func() { forward(ctx, sl, up, m.run.events) })
	return sl
}

// current resolves the index of ev's source, and reports false for an
// update of an instance that was stopped meanwhile.
func (m *Manager) current(ev *event) bool {
	if ev.sl == nil {
		return true
	}
	ev.src = ev.sl.idx
	return ev.src >= 0
}

// Reconfigure replaces the running sources with next, whose order is the
// new precedence order, without stopping the manager or publishing
// anything that did not change.
//
// An entry whose Source is nil keeps the running source of that Name as it
// is: same goroutine, same Status, same watches (the caller decides that
// its settings did not change). An entry with a Source and the Name of a
// running source is a changed source, replaced make-before-break: the new
// instance starts beside the previous one, whose services stay served (its
// updates too) until the new one's first update replaces them; if the new
// one has not synced when its startup timeout, counted from this call,
// ends, the previous instance stops and its last services stay served,
// stale, until the new one syncs (see replace.go). Any other entry is a
// new source: it starts, its startup timeout counted from this call.
// Running sources absent from next are stopped and their services
// removed, which the next publish (after the usual holdoff) carries:
// removing a source is the point of such a change. A source added after
// the first publish does not make the manager unready again: its services
// join when it syncs.
//
// next is checked whole before anything changes: a nil Source naming no
// running source, or a duplicate name, rejects it with an error and leaves
// every source running as before. Reconfigure must be called while Run
// runs; it returns once the new set is in place, not once the new
// instances have synced.
func (m *Manager) Reconfigure(ctx context.Context, next []Named) error {
	r := reconfiguration{next: next, done: make(chan error, 1)}
	select {
	case m.reconf <- r:
	case <-ctx.Done():
		return fmt.Errorf("reconfiguring sources: %w", ctx.Err())
	}
	return <-r.done
}

// check rejects a reconfiguration to next that Reconfigure must refuse;
// running maps the names of the running sources to their slots.
func check(next []Named, running map[string]*slot) error {
	seen := make(map[string]bool, len(next))
	for _, n := range next {
		if seen[n.Name] {
			return fmt.Errorf("reconfiguring sources: duplicate source name %q", n.Name)
		}
		seen[n.Name] = true
		if n.Source == nil && running[n.Name] == nil {
			return fmt.Errorf("reconfiguring sources: no running source %q to keep", n.Name)
		}
		if n.Source != nil && n.Status == nil {
			return errors.New("reconfiguring sources: source " + n.Name + " has no Status")
		}
	}
	return nil
}

// reconfigure applies next on the loop's goroutine at now and reports
// whether the merged state may have changed.
func (m *Manager) reconfigure(st *merger, in *intake, next []Named, now time.Time) (bool, error) {
	running := make(map[string]*slot, len(m.run.slots))
	for _, sl := range m.run.slots {
		running[sl.named.Name] = sl
	}
	if err := check(next, running); err != nil {
		return false, err
	}

	// A kept or changed source keeps its place's state (what it serves,
	// its guard, its phase): from is its old index, -1 for a new source.
	from := make([]int, len(next))
	named := make([]Named, len(next))
	reverts := make([]bool, len(next))
	for j, n := range next {
		sl := running[n.Name]
		delete(running, n.Name)
		switch {
		case sl == nil:
			from[j] = -1
			n.view = &statusView{}
			named[j] = n
		case n.Source == nil:
			from[j], named[j] = sl.idx, sl.named
		case in.reverts(sl.idx, n):
			from[j], named[j], reverts[j] = sl.idx, in.replacing[sl.idx].prev.named, true
		default:
			from[j] = sl.idx
			n.view = sl.named.view
			named[j] = n
		}
	}
	for _, sl := range running {
		m.log.Info("stopping source", "source", sl.named.Name)
		in.stopAll(sl)
	}
	m.mu.Lock()
	unsynced := make([]bool, len(next))
	for j := range next {
		unsynced[j] = from[j] < 0 || m.unsynced[from[j]]
	}
	m.opts.Sources, m.unsynced = named, unsynced
	m.mu.Unlock()

	in.reorder(from, now)
	slots := make([]*slot, len(next))
	for j, n := range next {
		switch {
		case from[j] < 0:
			m.log.Info("starting source", "source", n.Name)
			slots[j] = m.startSource(j, named[j])
		case n.Source == nil:
			slots[j] = m.run.slots[from[j]]
			slots[j].idx = j
			in.follow(j)
		case reverts[j]:
			slots[j] = in.revert(j, m.run.slots[from[j]])
		default:
			slots[j] = m.replace(in, j, m.run.slots[from[j]], now)
		}
	}
	m.run.slots = slots
	changed := st.reorder(from)
	st.follow(named, from)
	return changed, nil
}

// SetMerge replaces the merge configuration of the running manager, as a
// reloaded configuration does: the services whose rule changed are merged
// anew and published with the next batch (after the holdoff). mc must pass
// MergeConfig.Validate with the manager's source names; SetMerge checks it
// again and returns that error otherwise. It waits until the manager's loop
// takes the change, or ctx is done.
func (m *Manager) SetMerge(ctx context.Context, mc MergeConfig) error {
	running := m.Sources()
	names := make([]string, len(running))
	for i, n := range running {
		names[i] = n.Name
	}
	if err := mc.Validate(names); err != nil {
		return fmt.Errorf("changing the merge modes: %w", settings.Prefix("merge", err))
	}
	select {
	case m.merges <- mc:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("changing the merge modes: %w", ctx.Err())
	}
}

// applyMerge installs mc in st and reports whether that may change the
// merged state. The same configuration again (every reload sets it) is
// no change.
func (m *Manager) applyMerge(st *merger, mc MergeConfig) bool {
	if reflect.DeepEqual(st.mergeCfg, mc) {
		return false
	}
	m.log.Info("merge modes changed", "rules", len(mc.Services), "default", mc.Default)
	return st.setModes(mc)
}
