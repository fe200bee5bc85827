package bridge

import (
	"context"
	"os"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/sources"
)

// SetMerge applies a changed merge section (a new weight split during a
// cutover, say) to the running bridge without restarting its sources; see
// sources.Manager.SetMerge.
func (in *Instance) SetMerge(ctx context.Context, mc sources.MergeConfig) error {
	return in.manager.SetMerge(ctx, mc)
}

// ReloadMerge loads the configuration again with load whenever a value
// arrives on reload (SIGHUP) and applies its merge section, until ctx is
// done. Only that section is applied: the other settings need a restart,
// which the log says. A configuration that does not load is logged with
// its key and changes nothing.
func (in *Instance) ReloadMerge(ctx context.Context, reload <-chan os.Signal, load func() (*config.Config, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
		}
		cfg, err := load()
		if err == nil {
			err = in.SetMerge(ctx, cfg.Merge)
		}
		if err != nil {
			in.log.Error("reloading the configuration failed; keeping the current merge policy", "err", err)
			continue
		}
		in.log.Info("reloaded the merge section of the configuration; other changes take effect at the next restart")
	}
}
