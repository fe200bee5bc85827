package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/admin"
	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
)

// reloader applies a new configuration to a running bridge. Only the
// sources and the scoping rules change at run time; a change anywhere else (listeners, TLS,
// identity, admin, log, holdoff) needs a restart, which a reload reports
// without applying any of it. Open xDS streams are never touched: the
// manager publishes what the new set of sources changes, like any other
// change, and replaces a changed source make-before-break
// (manager.Reconfigure).
type reloader struct {
	log     *slog.Logger
	manager *manager.Manager
	total   *prometheus.CounterVec
	// scopes applies changed scoping rules (publisher.scope), nil for
	// none.
	scopes func(*translate.Scopes)

	mu  sync.Mutex // one reload at a time
	cfg *config.Config

	// loaded says when the configuration in force was read and which
	// reload was refused since, for the status page, which must not wait
	// for a reload in progress.
	loaded atomic.Pointer[loadedState]
}

type loadedState struct {
	path     string
	at       time.Time
	rejected *admin.Rejection
}

func newReloader(cfg *config.Config, m *manager.Manager, log *slog.Logger, reg prometheus.Registerer) *reloader {
	r := &reloader{log: log.With("component", "reload"), manager: m, cfg: cfg,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xdsbridge_config_reloads_total",
			Help: "Configuration reloads by result: applied, or rejected (invalid; the running configuration stays).",
		}, []string{"result"}),
	}
	r.total.WithLabelValues("applied")
	r.total.WithLabelValues("rejected")
	reg.MustRegister(r.total)
	r.loaded.Store(&loadedState{path: cfg.Path, at: time.Now()})
	return r
}

// ReloadResult says what a reload did.
type ReloadResult struct {
	// Kept, Started and Stopped name the sources left running untouched,
	// started (new or changed) and stopped (removed or changed). A changed
	// source is replaced make-before-break: its previous instance stops
	// once the new one has synced, or at the new one's startup timeout.
	Kept, Started, Stopped []string
	// NeedRestart lists the changed settings a reload does not apply.
	NeedRestart []string
	// Rescoped: the scoping rules changed and were applied.
	Rescoped bool
}

// Reload loads the configuration with load and applies it. A load error,
// or a source that cannot be built, rejects the new configuration whole:
// it is logged and counted, and the running one stays. It must be called
// while Run runs.
func (in *Instance) Reload(ctx context.Context, load func() (*config.Config, error)) (ReloadResult, error) {
	return in.reload.reload(ctx, load)
}

func (r *reloader) reload(ctx context.Context, load func() (*config.Config, error)) (ReloadResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, err := r.apply(ctx, load)
	prev := r.loaded.Load()
	if err != nil {
		r.loaded.Store(&loadedState{path: prev.path, at: prev.at, rejected: &admin.Rejection{At: time.Now(), Error: err.Error()}})
		r.total.WithLabelValues("rejected").Inc()
		r.log.Error("configuration reload rejected; the running configuration stays", "err", err)
		return res, err
	}
	r.total.WithLabelValues("applied").Inc()
	r.loaded.Store(&loadedState{path: r.cfg.Path, at: time.Now()})
	if len(res.NeedRestart) > 0 {
		r.log.Warn("configuration reloaded, but these settings changed and need a restart to take effect; they were not applied",
			"keys", strings.Join(res.NeedRestart, ", "))
	}
	r.log.Info("configuration reloaded", "kept", strings.Join(res.Kept, ","),
		"started", strings.Join(res.Started, ","), "stopped", strings.Join(res.Stopped, ","), "rescoped", res.Rescoped)
	return res, nil
}

func (r *reloader) apply(ctx context.Context, load func() (*config.Config, error)) (ReloadResult, error) {
	var res ReloadResult
	next, err := load()
	if err != nil {
		return res, err
	}
	old := r.cfg
	res.NeedRestart = restartKeys(old, next)
	running := map[string]config.Source{}
	for _, e := range old.Entries {
		running[e.Name] = e
	}
	named := make([]manager.Named, 0, len(next.Entries))
	for _, e := range next.Entries {
		if prev, ok := running[e.Name]; ok && reflect.DeepEqual(specOf(old, prev), specOf(next, e)) {
			named = append(named, manager.Named{Name: e.Name})
			res.Kept = append(res.Kept, e.Name)
			delete(running, e.Name)
			continue
		}
		n, err := newNamed(next, e, r.log)
		if err != nil {
			return ReloadResult{}, err
		}
		named = append(named, n)
		res.Started = append(res.Started, e.Name)
	}
	for _, e := range old.Entries {
		if _, gone := running[e.Name]; gone {
			res.Stopped = append(res.Stopped, e.Name)
		}
	}
	if err := r.manager.Reconfigure(ctx, named); err != nil {
		return ReloadResult{}, err
	}
	if err := r.manager.SetMerge(ctx, next.Merge); err != nil {
		return ReloadResult{}, err
	}
	// The settings that need a restart stay as they run: the next reload
	// compares against what is really in force.
	applied := *old
	applied.Sources, applied.Entries, applied.Dir, applied.Merge = next.Sources, next.Entries, next.Dir, next.Merge
	applied.Guard, applied.Path = next.Guard, next.Path
	if !reflect.DeepEqual(old.Scopes, next.Scopes) && r.scopes != nil {
		r.scopes(next.ScopeRules)
		res.Rescoped = true
	}
	applied.Scopes, applied.ScopeRules = next.Scopes, next.ScopeRules
	r.cfg = &applied
	return res, nil
}

// spec is what a source instance is built from: entries with equal specs
// (reflect.DeepEqual) build the same source. It includes the
// configuration's directory, against which relative paths resolve.
type spec struct {
	Type     string
	Dir      string
	Settings map[string]any
	Startup  manager.Startup
	Guard    manager.Guard
}

func specOf(cfg *config.Config, e config.Source) spec {
	return spec{Type: e.Type, Dir: cfg.Dir, Settings: e.Settings, Startup: e.Startup, Guard: e.Guard}
}

// newNamed builds the source of entry e of cfg, with its status.
func newNamed(cfg *config.Config, e config.Source, log *slog.Logger) (manager.Named, error) {
	st := sources.NewStatus(e.Name)
	src, err := cfg.NewSource(e, sources.Options{Logger: log.With("source", e.Name), Status: st})
	if err != nil {
		return manager.Named{}, err
	}
	return manager.Named{Name: e.Name, Source: src, Status: st, Startup: e.Startup, Guard: e.Guard, Spec: specOf(cfg, e)}, nil
}

// reloadable are the top-level keys a reload applies. The guard defaults
// apply through the source entries they are part of.
var reloadable = []string{"sources", "guard", "scopes", "merge"}

// restartKeys names, as full key paths, the changed settings a reload
// does not apply.
func restartKeys(a, b *config.Config) []string {
	var out []string
	for _, key := range config.Changed(a, b) {
		top, _, _ := strings.Cut(key, ".")
		top, _, _ = strings.Cut(top, "[")
		if !slices.Contains(reloadable, top) {
			out = append(out, key)
		}
	}
	return out
}

// String summarises the result for logs and tests.
func (r ReloadResult) String() string {
	return fmt.Sprintf("kept %v, started %v, stopped %v, need restart %v", r.Kept, r.Started, r.Stopped, r.NeedRestart)
}
