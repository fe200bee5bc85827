package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Changes is what the Manager publishes: the merged services that were
// added or changed since the previous publish, and the names of services
// that no longer exist in any source. Upserted is sorted by name and each
// service's endpoints are in canonical order (Service.Sort).
//
// The services are shared with the manager's own state (no copy is made, so
// that a publish costs what changed and nothing more): the receiver may keep
// them but must not modify them.
type Changes struct {
	Upserted []sources.Service
	Removed  []string
	// Failed, when set, records that the receiver could not serve the new
	// version of service: /sources shows it for the sources reporting it.
	// Call it only before the publish returns.
	Failed func(service string, err error)
}

// empty reports whether c carries nothing.
func (c Changes) empty() bool { return len(c.Upserted) == 0 && len(c.Removed) == 0 }

// Named is one configured source.
type Named struct {
	Name   string
	Source sources.Source
	Status *sources.Status
	// Startup and Guard are the source's readiness and removal-guard
	// settings; their zero values wait for ever and guard nothing.
	Startup Startup
	Guard   Guard
	// Spec, when set, identifies the configuration the Source was built
	// from (compared with reflect.DeepEqual). Reconfigure uses it to tell
	// a changed entry that goes back to the configuration still in force
	// during a replacement (see replace.go), which then keeps the running
	// instance instead of starting another.
	Spec any

	// view is the manager's part of the source's status (see
	// SourceStatus); the manager sets it when the source joins.
	view *statusView
}

// Options configure a Manager.
type Options struct {
	// Sources in order of precedence: when two sources report a service of
	// the same name, the earlier one's version is served.
	Sources []Named
	// Holdoff paces publishes (see Cadence): at most one per Holdoff
	// whatever the rate of changes, exactly one per Holdoff under steady
	// churn while publishes take less than Holdoff, and no change waits
	// longer than Holdoff beyond a publish in progress. MaxHoldoff only
	// bounds Holdoff (a Holdoff above it is cut to it); nothing else uses it.
	// Zero takes DefaultHoldoff and DefaultMaxHoldoff (or Holdoff, if
	// longer).
	Holdoff, MaxHoldoff time.Duration
	Logger              *slog.Logger
	// StateDir, when set, persists the state for warm starts, at most once
	// per SaveInterval (zero: DefaultSaveInterval).
	StateDir     StateDir
	SaveInterval time.Duration
	// Merge sets how the versions of a service reported by several sources
	// are combined (see MergeConfig); the zero value is MergeFirst for
	// every service. It must have passed MergeConfig.Validate.
	Merge MergeConfig
}

// Defaults of Options and of the restart backoff of failed sources.
const (
	DefaultHoldoff    = 100 * time.Millisecond
	DefaultMaxHoldoff = time.Second
	restartMin        = time.Second
	restartMax        = 30 * time.Second
)

// Manager runs the configured sources, merges their services by precedence
// and publishes coalesced changes.
//
// All merging happens on the goroutine of Run: each source runs in its own
// goroutine and sends into its own channel, which a forwarder relays to Run.
// The merged state is kept in maps, so a change of one service costs the same
// with ten services or ten thousand.
type Manager struct {
	opts Options
	log  *slog.Logger
	// restartMin and restartMax bound the backoff between restarts of a
	// source whose Run failed; tests shorten them.
	restartMin, restartMax time.Duration

	merges chan MergeConfig // see SetMerge

	mu       sync.Mutex
	unsynced []bool // by source index, until the first publish
	ready    bool   // the first publish returned
	running  bool

	confirms chan confirmation
	saver    *saver
	stateDir stateDirHealth

	// What Reconfigure needs (reconfigure.go): requests to the loop, and
	// the loop's record of the running sources.
	reconf chan reconfiguration
	run    runState
}

// NewManager returns a manager for opts.
func NewManager(opts Options) *Manager {
	if opts.Holdoff <= 0 {
		opts.Holdoff = DefaultHoldoff
	}
	if opts.MaxHoldoff <= 0 {
		opts.MaxHoldoff = max(DefaultMaxHoldoff, opts.Holdoff)
	}
	opts.Holdoff = min(opts.Holdoff, opts.MaxHoldoff)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SaveInterval <= 0 {
		opts.SaveInterval = DefaultSaveInterval
	}
	opts.Sources = slices.Clone(opts.Sources)
	for i := range opts.Sources {
		opts.Sources[i].view = &statusView{}
	}
	unsynced := make([]bool, len(opts.Sources))
	for i := range unsynced {
		unsynced[i] = true
	}
	return &Manager{
		opts:       opts,
		log:        opts.Logger,
		restartMin: restartMin,
		restartMax: restartMax,
		unsynced:   unsynced,
		confirms:   make(chan confirmation),
		reconf:     make(chan reconfiguration),
		merges:     make(chan MergeConfig),
	}
}

// event is one update relayed from source number src, or from the source
// instance of slot sl, whose index may change when the manager is
// reconfigured.
type event struct {
	src int
	sl  *slot
	up  sources.Update
}

// Run starts every source and calls publish, always from the same goroutine,
// with the merged changes. The first publish happens once every source has
// sent its first (Full) update and carries the complete merged state (even
// when it is empty); later publishes carry only what changed. Run returns
// nil when ctx is done, after every source has returned. A source whose Run
// returns early is logged, marked failed in its Status and restarted with
// backoff; the services it reported stay until it reports again.
func (m *Manager) Run(ctx context.Context, publish func(Changes)) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return errors.New("running source manager: already running")
	}
	m.running = true
	m.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	events := make(chan event)
	var wg sync.WaitGroup
	m.run = runState{ctx: ctx, wg: &wg, events: events}
	for i, n := range m.opts.Sources {
		m.run.slots = append(m.run.slots, m.startSource(i, n))
	}
	if m.opts.StateDir != nil {
		m.saver = &saver{dir: m.opts.StateDir, pending: make(chan map[string][]sources.Service, 1), m: m}
		wg.Go(func() { m.saver.run(ctx) })
	}
	in := m.loop(ctx, events, publish)
	cancel()
	wg.Wait()
	if m.saver != nil && !in.saveDue.IsZero() {
		// The last changes, which the rate limit held back.
		m.saver.save(in.snapshot())
	}
	return nil
}

// forward relays the updates of the source of sl to the manager's loop,
// stamped with the source's name (provenance for /debug/why and shaping
// rules).
func forward(ctx context.Context, sl *slot, up <-chan sources.Update, events chan<- event) {
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-up:
			stamp(u, sl.named.Name)
			select {
			case events <- event{sl: sl, up: u}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// stamp records in every service and endpoint of u the name of the source
// that sent it. forward calls it on each update it relays, which the
// manager owns by then (see sources.Update).
func stamp(u sources.Update, source string) {
	for i := range u.Services {
		s := &u.Services[i]
		s.Source = source
		for j := range s.Endpoints {
			s.Endpoints[j].Origin.Source = source
		}
	}
}

// loop applies updates and publishes until ctx is done, and returns its
// intake for a last save. The first publish happens as soon as the
// readiness gate opens (see startup.go), without holdoff: every source it
// waits for has delivered its whole state, and readiness waits for it.
// Later changes are published in batches paced by Cadence.
func (m *Manager) loop(ctx context.Context, events <-chan event, publish func(Changes)) *intake {
	st := newMerger(m.opts.Sources, m.opts.Merge, m.log)
	in := newIntake(m, time.Now())
	st.changes = in.changes
	defer in.timer.Stop()
	publish = in.reporting(publish)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed := (<-chan time.Time)(nil) // timer.C while a batch waits, else nil
	cad := Cadence{Holdoff: m.opts.Holdoff}
	// settle publishes or arms the holdoff after updates were merged.
	settle := func(changed bool, now time.Time) {
		in.changes.flush(now)
		switch {
		case in.open:
			if !changed {
				return
			}
			if !cad.Waiting() {
				timer.Reset(cad.Add(now).Sub(now))
				armed = timer.C
			}
		case in.gate():
			cad.Published(now)
			m.firstPublish(st, publish)
			cad.Finished(time.Now())
			in.open = true
			in.published(now)
		default:
			m.setPending(in.pending())
		}
	}
	settle(false, time.Now())
	for {
		select {
		case <-ctx.Done():
			return in
		case r := <-m.reconf:
			now := time.Now()
			changed, err := m.reconfigure(st, in, r.next, now)
			r.done <- err
			settle(changed, now)
			in.rearm(now)
		case ev := <-events:
			if !m.current(&ev) {
				continue // from a source removed meanwhile
			}
			now := time.Now()
			changed := st.apply(ev.src, in.receive(ev.src, ev.sl != nil && ev.sl.prev, ev.up, now))
			settle(changed, now)
			in.rearm(now)
		case now := <-in.timer.C:
			changed := false
			for src, u := range in.due(now) {
				changed = st.apply(src, u) || changed
			}
			settle(changed, now)
			in.rearm(now)
		case c := <-m.confirms:
			now := time.Now()
			c.reply <- m.confirm(in, st, c.source)
			settle(true, now)
			in.rearm(now)
		case mc := <-m.merges:
			now := time.Now()
			settle(m.applyMerge(st, mc), now)
			in.rearm(now)
		case <-armed:
			armed = nil
			cad.Published(time.Now())
			if c := st.flush(); !c.empty() {
				m.log.Debug("publishing changes", "upserted", len(c.Upserted), "removed", len(c.Removed))
				publish(c)
				in.published(time.Now())
				in.rearm(time.Now())
			}
			cad.Finished(time.Now())
		}
	}
}

// firstPublish hands the complete merged state over and only then marks the
// bridge ready, so that an empty Pending means the state was published.
func (m *Manager) firstPublish(st *merger, publish func(Changes)) {
	c := st.flush()
	m.log.Info("readiness gate open; publishing the merged state", "services", len(c.Upserted))
	publish(c)
	m.mu.Lock()
	m.ready = true
	m.mu.Unlock()
}

func (m *Manager) setPending(pending []bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.unsynced, pending)
}

// Pending returns the names of the sources that have not completed their
// first sync, in configuration order. It is empty only once the first
// publish has returned, so a ready bridge has handed its state over. It is
// safe for concurrent use.
func (m *Manager) Pending() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready {
		return nil
	}
	var names []string
	for i, n := range m.opts.Sources {
		if m.unsynced[i] {
			names = append(names, n.Name)
		}
	}
	return names
}

// confirmation asks the loop to end a source's hold at once.
type confirmation struct {
	source string
	reply  chan error
}

// ConfirmRemovals ends the removal hold of the named source at once: what
// the source reports now is applied. It fails when the manager is not
// running, no source has that name, or no hold is on.
func (m *Manager) ConfirmRemovals(ctx context.Context, source string) error {
	c := confirmation{source: source, reply: make(chan error, 1)}
	select {
	case m.confirms <- c:
	case <-ctx.Done():
		return fmt.Errorf("confirming the removals of %q: %w", source, ctx.Err())
	}
	return <-c.reply
}

// confirm runs on the loop: it releases the hold of source, merging what
// the source reports.
func (m *Manager) confirm(in *intake, st *merger, source string) error {
	for i, n := range m.opts.Sources {
		if n.Name != source {
			continue
		}
		if in.guards[i].hold == nil {
			return fmt.Errorf("source %q holds no removals", source)
		}
		st.apply(i, in.release(i, "confirmed by an operator"))
		return nil
	}
	return fmt.Errorf("%w %q", ErrNoSource, source)
}

// ErrNoSource is what ConfirmRemovals returns, wrapped, for a name that no
// source has.
var ErrNoSource = errors.New("no source named")

// Sources returns the running sources in precedence order. It is safe for
// concurrent use.
func (m *Manager) Sources() []Named {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Named(nil), m.opts.Sources...)
}

// Statuses returns the status of every running source, in precedence
// order. It is safe for concurrent use.
func (m *Manager) Statuses() []SourceStatus {
	named := m.Sources()
	out := make([]SourceStatus, len(named))
	for i, n := range named {
		out[i] = n.snapshot()
	}
	return out
}
