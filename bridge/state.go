package bridge

import (
	"log/slog"
	"path/filepath"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources/state"
)

// warmStore returns the warm-start store of cfg, or nil when state_dir is
// not set. A relative state_dir is relative to the configuration file.
func warmStore(cfg *config.Config, log *slog.Logger) manager.Store {
	if cfg.StateDir == "" {
		return nil
	}
	dir := cfg.StateDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cfg.Dir, dir)
	}
	fps := make(map[string]string, len(cfg.Entries))
	for _, e := range cfg.Entries {
		fps[e.Name] = state.Fingerprint(e.Name, e.Type, e.Settings)
	}
	return state.New(dir, fps, log.With("component", "state"))
}
