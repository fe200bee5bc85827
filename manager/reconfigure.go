package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// slot is one running source: its place in the precedence order (-1 once
// removed; only the manager's loop reads or writes it) and how to stop it.
type slot struct {
	idx    int
	named  Named
	cancel context.CancelFunc
}

// runState is what Run shares with the loop for starting sources later.
type runState struct {
	ctx    context.Context
	wg     *sync.WaitGroup
	events chan event
	slots  []*slot // in precedence order; owned by the loop
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
// update of a source that was removed meanwhile.
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
// its settings did not change). Any other entry is a new source: it is
// started, and a running source of the same name is stopped. Running
// sources absent from next are stopped and their services removed, which
// the next publish (after the usual holdoff) carries. A source added after
// the first publish does not make the manager unready again: its services
// join when it syncs.
//
// next is checked whole before anything changes: a nil Source naming no
// running source, or a duplicate name, rejects it with an error and leaves
// every source running as before. Reconfigure must be called while Run
// runs; it returns once the new set is in place.
func (m *Manager) Reconfigure(ctx context.Context, next []Named) error {
	r := reconfiguration{next: next, done: make(chan error, 1)}
	select {
	case m.reconf <- r:
	case <-ctx.Done():
		return fmt.Errorf("reconfiguring sources: %w", ctx.Err())
	}
	return <-r.done
}

// reconfigure applies next on the loop's goroutine and reports whether the
// merged state may have changed.
func (m *Manager) reconfigure(st *merger, in *intake, next []Named) (bool, error) {
	running := make(map[string]*slot, len(m.run.slots))
	for _, sl := range m.run.slots {
		running[sl.named.Name] = sl
	}
	seen := make(map[string]bool, len(next))
	for _, n := range next {
		if seen[n.Name] {
			return false, fmt.Errorf("reconfiguring sources: duplicate source name %q", n.Name)
		}
		seen[n.Name] = true
		if n.Source == nil && running[n.Name] == nil {
			return false, fmt.Errorf("reconfiguring sources: no running source %q to keep", n.Name)
		}
		if n.Source != nil && n.Status == nil {
			return false, errors.New("reconfiguring sources: source " + n.Name + " has no Status")
		}
	}

	from := make([]int, len(next)) // old index of each kept source, -1 if new
	slots := make([]*slot, len(next))
	named := make([]Named, len(next))
	kept := map[*slot]bool{}
	for j, n := range next {
		from[j] = -1
		if n.Source == nil {
			sl := running[n.Name]
			from[j], slots[j], kept[sl] = sl.idx, sl, true
		}
	}
	for _, sl := range m.run.slots {
		if !kept[sl] {
			m.log.Info("stopping source", "source", sl.named.Name)
			sl.cancel()
			sl.idx = -1
		}
	}
	m.mu.Lock()
	unsynced := make([]bool, len(next))
	for j, n := range next {
		if slots[j] != nil {
			slots[j].idx = j
			unsynced[j] = m.unsynced[from[j]]
		} else {
			m.log.Info("starting source", "source", n.Name)
			n.view = &statusView{}
			slots[j] = m.startSource(j, n)
			unsynced[j] = true
		}
		named[j] = slots[j].named
	}
	m.opts.Sources, m.unsynced = named, unsynced
	m.mu.Unlock()
	m.run.slots = slots
	in.reorder(from)
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
		return fmt.Errorf("changing the merge policy: %w", settings.Prefix("merge", err))
	}
	select {
	case m.merges <- mc:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("changing the merge policy: %w", ctx.Err())
	}
}

// applyMerge installs mc in st and reports whether that may change the
// merged state.
func (m *Manager) applyMerge(st *merger, mc MergeConfig) bool {
	m.log.Info("merge policy changed", "rules", len(mc.Services), "default", mc.Default)
	return st.setModes(mc)
}
