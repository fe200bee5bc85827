package sources

import (
	"context"
	"fmt"
)

// newMerger returns the merger of the manager's sources and merge policy.
func (m *Manager) newMerger() *merger {
	st := newMerger(len(m.opts.Sources))
	for i, n := range m.opts.Sources {
		st.names[i] = n.Name
		st.statuses[i] = n.Status
	}
	st.policy = m.opts.Merge.compile(st.names)
	st.log = m.log
	return st
}

// SetMerge replaces the merge policy of the running manager, as a changed
// configuration would: the services whose rule changed are merged anew and
// published with the next batch (after the holdoff). mc must pass MergeConfig.Validate with the manager's
// source names; SetMerge checks it again and returns that error otherwise.
// It waits until the manager's loop takes the change, or ctx is done.
func (m *Manager) SetMerge(ctx context.Context, mc MergeConfig) error {
	names := make([]string, len(m.opts.Sources))
	for i, n := range m.opts.Sources {
		names[i] = n.Name
	}
	if err := mc.Validate(names); err != nil {
		return fmt.Errorf("changing the merge policy: %w", Prefix("merge", err))
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
	return st.setPolicy(mc.compile(st.names))
}
