package bridge

import (
	"context"

	"github.com/xdsbridge/xdsbridge/manager"
)

// SetMerge applies a changed merge section (a new weight split during a
// cutover, say) to the running bridge without restarting its sources; see
// manager.Manager.SetMerge. A reload (SIGHUP) applies the merge section of
// the reloaded file the same way.
func (in *Instance) SetMerge(ctx context.Context, mc manager.MergeConfig) error {
	return in.manager.SetMerge(ctx, mc)
}
