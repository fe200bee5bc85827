package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
// sources, their management (startup and guard), the merge section and
// the scoping rules change at run time; a change anywhere else (listeners, TLS, identity,
// admin, log, holdoff, ...) needs a restart, which a reload reports without
// applying any of it. Open xDS streams are never touched: the manager
// publishes what the new set of sources changes, like any other change,
// and replaces a changed source make-before-break (manager.Reconfigure).
//
// Reloads are asked for by SIGHUP, POST /-/reload and the watch of the
// configuration file (request); the requests that arrive while a reload
// runs are served together by the next one, so that a storm of them costs
// one reload at a time and one more queued.
type reloader struct {
	log *slog.Logger
	// sourceLog is the bridge's logger, which the sources a reload builds
	// log to as the ones built at the start do.
	sourceLog *slog.Logger
	manager   *manager.Manager
	total     *prometheus.CounterVec
	// scopes applies changed scoping rules (publisher.scope), nil for
	// none.
	scopes func(*translate.Scopes)

	mu  sync.Mutex // one reload at a time
	cfg *config.Config

	// loaded says when the configuration in force was read and which
	// reload was refused since, for the status page, which must not wait
	// for a reload in progress.
	loaded atomic.Pointer[loadedState]

	// What request and serve share: the loader of the configuration file
	// (nil until Instance.ReloadFrom), the reload the requests made since
	// the running one started wait for, and serve's wake-up.
	qmu  sync.Mutex
	load func() (*config.Config, error)
	next *ticket
	wake chan struct{}
}

type loadedState struct {
	path     string
	at       time.Time
	rejected *admin.Rejection
}

// ticket is one reload, shared by every request that arrived before it
// began.
type ticket struct {
	done    chan struct{} // closed once res and err are set
	askedBy map[string]int
	res     ReloadResult
	err     error
}

func newReloader(cfg *config.Config, m *manager.Manager, log *slog.Logger, reg prometheus.Registerer) *reloader {
	r := &reloader{log: log.With("component", "reload"), sourceLog: log, manager: m, cfg: cfg, wake: make(chan struct{}, 1),
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
	Kept    []string `json:"kept"`
	Started []string `json:"started"`
	Stopped []string `json:"stopped"`
	// NeedRestart lists the full key paths of the changed settings a
	// reload does not apply ("admin.listen").
	NeedRestart []string `json:"need_restart"`
	// Rescoped: the scoping rules changed and were applied.
	Rescoped bool `json:"rescoped"`
}

// invalidConfig marks a reload refused because of the configuration
// itself (it does not load, or a source cannot be built from it), as
// opposed to one the running bridge could not take.
type invalidConfig struct{ err error }

func (e invalidConfig) Error() string { return e.err.Error() }
func (e invalidConfig) Unwrap() error { return e.err }

// Reload loads the configuration with load and applies it now. A load
// error, or a source that cannot be built, rejects the new configuration
// whole: it is logged and counted, and the running one stays. It must be
// called while Run runs.
func (in *Instance) Reload(ctx context.Context, load func() (*config.Config, error)) (ReloadResult, error) {
	return in.reload.reload(ctx, load)
}

// ReloadFrom sets how RequestReload, POST /-/reload and the watch of the
// configuration file (reload.watch_config) read the configuration: load,
// typically config.Load of the file with the command line's flags. Call
// it before Run; without it those requests are refused.
func (in *Instance) ReloadFrom(load func() (*config.Config, error)) {
	in.reload.qmu.Lock()
	defer in.reload.qmu.Unlock()
	in.reload.load = load
}

// RequestReload asks for a reload of the configuration with the loader
// given to ReloadFrom, by askedBy (named in the log: "SIGHUP", say), and
// returns its outcome as Reload does. Requests that arrive while a reload
// runs are served together by the next one, which reads the file after
// they all asked. A request made before Run is served once Run runs.
func (in *Instance) RequestReload(ctx context.Context, askedBy string) (ReloadResult, error) {
	return in.reload.request(ctx, askedBy)
}

func (r *reloader) request(ctx context.Context, askedBy string) (ReloadResult, error) {
	r.qmu.Lock()
	if r.load == nil {
		r.qmu.Unlock()
		return ReloadResult{}, errors.New("reloading the configuration: the bridge was not given its configuration file")
	}
	t := r.next
	if t == nil {
		t = &ticket{done: make(chan struct{}), askedBy: map[string]int{}}
		r.next = t
		select {
		case r.wake <- struct{}{}:
		default: // serve is busy and already woken for this ticket
		}
	}
	t.askedBy[askedBy]++
	r.qmu.Unlock()
	select {
	case <-t.done:
		return t.res, t.err
	case <-ctx.Done():
		return ReloadResult{}, fmt.Errorf("reloading the configuration: %w", ctx.Err())
	}
}

// watch returns the watch of the configuration file that
// reload.watch_config asks for, or nil.
func (r *reloader) watch() *configWatch {
	r.mu.Lock()
	cfg := r.cfg
	r.mu.Unlock()
	r.qmu.Lock()
	load := r.load
	r.qmu.Unlock()
	switch {
	case !cfg.Reload.WatchConfig:
		return nil
	case load == nil || cfg.Path == "":
		r.log.Warn("reload.watch_config is set, but the bridge was not given its configuration file to watch")
		return nil
	}
	return newConfigWatch(cfg.Path, cfg.Digest, func(ctx context.Context) error {
		_, err := r.request(ctx, "the configuration file's watch")
		return err
	}, r.log)
}

// answer is what POST /-/reload runs (admin.Options.Reload). Its lists
// are empty rather than null in JSON.
func (r *reloader) answer(ctx context.Context) (any, bool, error) {
	res, err := r.request(ctx, "POST /-/reload")
	for _, l := range []*[]string{&res.Kept, &res.Started, &res.Stopped, &res.NeedRestart} {
		if *l == nil {
			*l = []string{}
		}
	}
	return res, errors.As(err, new(invalidConfig)), err
}

// serve runs the requested reloads, one at a time, until ctx is done.
func (r *reloader) serve(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.qmu.Lock()
		t, load := r.next, r.load
		r.next = nil
		r.qmu.Unlock()
		if t == nil {
			continue
		}
		r.log.Info("reloading the configuration", "asked_by", describeAskers(t.askedBy))
		t.res, t.err = r.reload(ctx, load)
		close(t.done)
	}
}

// describeAskers says who asked for one reload: "SIGHUP", "POST /-/reload,
// SIGHUP (3)".
func describeAskers(by map[string]int) string {
	var parts []string
	for _, who := range slices.Sorted(maps.Keys(by)) {
		if n := by[who]; n > 1 {
			who = fmt.Sprintf("%s (%d)", who, n)
		}
		parts = append(parts, who)
	}
	return strings.Join(parts, ", ")
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
		return res, invalidConfig{err}
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
		n, err := newNamed(next, e, r.sourceLog)
		if err != nil {
			return ReloadResult{}, invalidConfig{err}
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
	applied.Guard, applied.Path, applied.Digest = next.Guard, next.Path, next.Digest
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
