package manager

import (
	"context"
	"fmt"

	"github.com/xdsbridge/xdsbridge/settings"
)

// newMerger returns the merger of the manager's sources and merge policy.
func (m *Manager) newMerger() *merger {
	st := newMerger(len(m.opts.Sources))
	for i, n := range m.opts.Sources {
		st.names[i] = n.Name
		st.views[i] = n.view
	}
	st.setPolicy(m.opts.Merge)
	st.log = m.log
	return st
}

// SetMerge replaces the merge policy of the running manager, as a changed
// configuration would: the services whose rule changed are merged anew and
// published with the next batch (after the holdoff). mc must pass MergeConfig.Validate with the manager's
// source names; SetMerge checks it again and returns that error otherwise.
// It waits until the manager's loop takes the change, or ctx is done.
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
	return st.setPolicy(mc)
}

// follow gives the merger's per-source merge state to the sources of a
// reconfiguration (see merger.reorder, which moves their services and marks
// every name dirty): entry j is named[j], formerly source from[j] (-1 for a
// new source). The policy is compiled again, since its weights are indexed
// by source.
func (m *merger) follow(named []Named, from []int) {
	shadowed := m.shadowed
	m.names = make([]string, len(named))
	m.views = make([]*statusView, len(named))
	m.shadowed = make([]map[string]struct{}, len(named))
	m.served = make([]bool, len(named))
	for j, n := range named {
		m.names[j], m.views[j], m.shadowed[j] = n.Name, n.view, map[string]struct{}{}
		if from[j] >= 0 {
			m.shadowed[j] = shadowed[from[j]]
		}
	}
	m.policy = m.mergeCfg.compile(m.names)
}
