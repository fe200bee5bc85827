package sources

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
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
	Upserted []Service
	Removed  []string
}

// empty reports whether c carries nothing.
func (c Changes) empty() bool { return len(c.Upserted) == 0 && len(c.Removed) == 0 }

// Named is one configured source.
type Named struct {
	Name   string
	Source Source
	Status *Status
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Sources in order of precedence: when two sources report a service of
	// the same name, the earlier one's version is served.
	Sources []Named
	// Holdoff is how long the manager waits after a change for more changes
	// before it publishes (reset by each change); MaxHoldoff bounds the total
	// delay of a burst. Defaults: 100ms and 1s.
	Holdoff, MaxHoldoff time.Duration
	// Merge sets how the versions of a service reported by several sources
	// are combined (see MergeConfig); the zero value is MergeFirst for
	// every service. It must have passed MergeConfig.Validate.
	Merge  MergeConfig
	Logger *slog.Logger
}

// Defaults of ManagerOptions and of the restart backoff of failed sources.
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
	opts ManagerOptions
	log  *slog.Logger
	// restartMin and restartMax bound the backoff between restarts of a
	// source whose Run failed; tests shorten them.
	restartMin, restartMax time.Duration

	merges chan MergeConfig // see SetMerge

	mu       sync.Mutex
	unsynced []bool // by source index, until the first publish
	ready    bool   // the first publish returned
	running  bool
}

// NewManager returns a manager for opts.
func NewManager(opts ManagerOptions) *Manager {
	if opts.Holdoff <= 0 {
		opts.Holdoff = DefaultHoldoff
	}
	if opts.MaxHoldoff <= 0 {
		opts.MaxHoldoff = DefaultMaxHoldoff
	}
	opts.MaxHoldoff = max(opts.MaxHoldoff, opts.Holdoff)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
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
		merges:     make(chan MergeConfig),
	}
}

// event is one update relayed from source number src.
type event struct {
	src int
	up  Update
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
	for i, n := range m.opts.Sources {
		up := make(chan Update)
		wg.Go(func() { m.supervise(ctx, n, up) })
		wg.Go(func() { forward(ctx, i, up, events) })
	}
	m.loop(ctx, events, publish)
	cancel()
	wg.Wait()
	return nil
}

// forward relays the updates of source i to the manager's loop.
func forward(ctx context.Context, i int, up <-chan Update, events chan<- event) {
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-up:
			select {
			case events <- event{src: i, up: u}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// loop applies updates and publishes until ctx is done. The first publish
// happens as soon as the last source syncs, without holdoff: every source
// has delivered its whole state, and readiness waits for it. Later changes
// arm one timer whose deadline is the holdoff after the latest change,
// capped at MaxHoldoff after the first unpublished one.
func (m *Manager) loop(ctx context.Context, events <-chan event, publish func(Changes)) {
	st := m.newMerger()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		armed     <-chan time.Time // timer.C while a batch waits, else nil
		batchFrom time.Time        // first unpublished change of the batch
		started   bool             // the first publish happened
	)
	if len(m.opts.Sources) == 0 {
		m.firstPublish(st, publish)
		started = true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if !st.synced[ev.src] && !ev.up.Full {
				m.log.Warn("first update of a source is not full; treating it as its complete state",
					"source", m.opts.Sources[ev.src].Name)
				ev.up.Full = true
			}
			wasSynced := st.synced[ev.src]
			changed := st.apply(ev.src, ev.up)
			if !wasSynced {
				m.log.Info("source synced", "source", m.opts.Sources[ev.src].Name, "services", len(st.bySource[ev.src]))
			}
			if started {
				if !changed {
					continue
				}
				now := time.Now()
				if armed == nil {
					batchFrom = now
				}
				timer.Reset(min(m.opts.Holdoff, batchFrom.Add(m.opts.MaxHoldoff).Sub(now)))
				armed = timer.C
				continue
			}
			if st.allSynced() {
				m.firstPublish(st, publish)
				started = true
			} else if !wasSynced {
				m.removePending(ev.src)
			}
		case mc := <-m.merges:
			m.applyMerge(st, mc, started, publish)
		case <-armed:
			armed = nil
			if c := st.flush(); !c.empty() {
				m.log.Debug("publishing changes", "upserted", len(c.Upserted), "removed", len(c.Removed))
				publish(c)
			}
		}
	}
}

// firstPublish hands the complete merged state over and only then marks the
// last sources synced, so that an empty Pending means the state was
// published.
func (m *Manager) firstPublish(st *merger, publish func(Changes)) {
	c := st.flush()
	m.log.Info("all sources synced; publishing the merged state", "services", len(c.Upserted))
	publish(c)
	m.mu.Lock()
	m.ready = true
	m.mu.Unlock()
}

func (m *Manager) removePending(src int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unsynced[src] = false
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
