package bridge

import (
	"log/slog"
	"path/filepath"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/manager/statedir"
)

// newStateDir returns the state directory of cfg, or nil when state_dir is
// not set. A relative state_dir is relative to the configuration file.
func newStateDir(cfg *config.Config, log *slog.Logger) manager.StateDir {
	if cfg.StateDir == "" {
		return nil
	}
	dir := cfg.StateDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cfg.Dir, dir)
	}
	fps := make(map[string]string, len(cfg.Entries))
	for _, e := range cfg.Entries {
		fps[e.Name] = statedir.Fingerprint(e.Name, e.Type, e.Settings)
	}
	return statedir.New(dir, fps, log.With("component", "state_dir"))
}
