package manager

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// StateDir keeps what every source last reported across restarts, so
// that after a restart a source that cannot sync serves what it served
// before, flagged stale, rather than nothing (warm start, PhaseWarm).
// Package statedir keeps it in the directory state_dir names. A StateDir
// that also has a Path() string method says where it keeps the state
// (StateDirStatus.Path).
type StateDir interface {
	// Load returns the persisted services of each source, by source name;
	// no state at all is neither state nor error. State that cannot be
	// read (corrupt, truncated, in a format this version does not read)
	// is ignored whole, never used in part: Load returns no state and an
	// error saying why, which the manager logs once and shows in
	// StateDirStatus.LoadError. A source whose state cannot be used
	// alone (it is configured differently since, or its services are not
	// valid) is left out, and the implementation logs that.
	Load() (map[string][]sources.Service, error)
	// Save persists the services of each source, replacing what was saved
	// before, atomically: a crash leaves the old state or the new one.
	Save(map[string][]sources.Service) error
}

// StateDirStatus is how the writes to the state directory go, for /state,
// the status page and the metrics: a state directory that cannot be
// written shows there, not only in the log. It does not make the bridge
// unready: the bridge serves as before, and only a restart would miss the
// state.
type StateDirStatus struct {
	// Enabled is false without a state directory (no state_dir).
	Enabled bool `json:"enabled"`
	// Path is where the state is kept, when the StateDir says.
	Path string `json:"path,omitempty"`
	// Saved is when the state was last written, zero if never.
	Saved time.Time `json:"saved,omitzero"`
	// Failing is true while the latest write failed; Since is when the
	// failing period began and Error the latest failure's.
	Failing bool      `json:"failing"`
	Since   time.Time `json:"failing_since,omitzero"`
	Error   string    `json:"error,omitempty"`
	// Failures counts the failed writes since the process started.
	Failures int `json:"failures"`
	// LoadError, when not empty, is why the state found at startup was
	// ignored: this process started without a warm start. It stays for
	// the life of the process, while the next write replaces the file.
	LoadError string `json:"load_error,omitempty"`
}

// stateDirHealth is the manager's record of its saver's writes.
type stateDirHealth struct {
	mu sync.Mutex
	st StateDirStatus
}

func (h *stateDirHealth) saved(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.Saved, h.st.Failing, h.st.Since, h.st.Error = at, false, time.Time{}, ""
}

func (h *stateDirHealth) failed(at time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.st.Failing {
		h.st.Failing, h.st.Since = true, at
	}
	h.st.Error = err.Error()
	h.st.Failures++
}

// load returns the persisted state of dir, or none when it cannot be
// read, which it logs and records.
func (h *stateDirHealth) load(dir StateDir, log *slog.Logger) map[string][]sources.Service {
	state, err := dir.Load()
	if err != nil {
		log.Warn("ignoring the persisted state for warm starts: it cannot be read; starting without it", "err", err)
		h.mu.Lock()
		h.st.LoadError = err.Error()
		h.mu.Unlock()
		return nil
	}
	return state
}

// StateDirStatus returns how persisting the state for warm starts goes.
func (m *Manager) StateDirStatus() StateDirStatus {
	m.stateDir.mu.Lock()
	st := m.stateDir.st
	m.stateDir.mu.Unlock()
	st.Enabled = m.opts.StateDir != nil
	if p, ok := m.opts.StateDir.(interface{ Path() string }); ok {
		st.Path = p.Path()
	}
	return st
}

// DefaultSaveInterval is the shortest time between two saves of the
// state: a save costs a write of the whole state, and the changes of the
// last interval at most are lost to a crash.
const DefaultSaveInterval = 2 * time.Second

// saver writes snapshots of the state on its own goroutine, so that a slow
// disk never delays a publish; only the newest pending snapshot is kept.
// A failed write is retried after a backoff (saveRetryMin doubling to
// saveRetryMax, with jitter) with the newest snapshot: the snapshots that
// arrive meanwhile wait for that retry rather than each trying the failing
// disk again.
type saver struct {
	dir     StateDir
	pending chan map[string][]sources.Service
	m       *Manager
}

// The backoff of a failing state directory.
const (
	saveRetryMin = time.Second
	saveRetryMax = time.Minute
)

func (s *saver) run(ctx context.Context) {
	bo := sources.Backoff{Min: saveRetryMin, Max: saveRetryMax}
	fails := sources.FailureLog{Log: s.m.log, Level: slog.LevelError,
		FailingMsg: "cannot persist the state for warm starts", RecoveredMsg: "persisting the state for warm starts again"}
	var snap map[string][]sources.Service
	var retry <-chan time.Time // armed while the state directory fails
	for {
		select {
		case <-ctx.Done():
			return
		case snap = <-s.pending:
			if retry != nil {
				continue
			}
		case <-retry:
			retry = nil
		}
		if err := s.dir.Save(snap); err != nil {
			s.m.stateDir.failed(time.Now(), err)
			fails.Failed(err)
			retry = time.After(bo.Next())
			continue
		}
		s.m.stateDir.saved(time.Now())
		bo.Reset()
		fails.Recovered()
	}
}

// save stores snap once more, as the manager stops: a failure is logged,
// not retried.
func (s *saver) save(snap map[string][]sources.Service) {
	if err := s.dir.Save(snap); err != nil {
		s.m.stateDir.failed(time.Now(), err)
		s.m.log.Error("cannot persist the state for warm starts", "err", err)
		return
	}
	s.m.stateDir.saved(time.Now())
}

// offer queues snap, replacing a snapshot not yet written.
func (s *saver) offer(snap map[string][]sources.Service) {
	for {
		select {
		case s.pending <- snap:
			return
		default:
		}
		select {
		case <-s.pending:
		default:
		}
	}
}

// snapshot returns what to persist: the services served for each source
// that synced, serves warm state or is being replaced (and so serves what
// its previous instance reported, which a timed-out replacement keeps),
// and the loaded state of the others, so that a source still waiting
// keeps what it had.
func (in *intake) snapshot() map[string][]sources.Service {
	out := make(map[string][]sources.Service, len(in.guards))
	for i, g := range in.guards {
		name := in.m.opts.Sources[i].Name
		switch ph := in.phases[i]; {
		case ph == PhaseSynced || ph == PhaseWarm || ph == PhaseReplacing,
			ph == PhaseTimedOut && len(g.eff) > 0:
			out[name] = slices.Collect(maps.Values(g.eff))
		default:
			if old, ok := in.loaded[name]; ok {
				out[name] = old
			}
		}
	}
	return out
}

// published notes that the merged state changed, so that it gets saved.
func (in *intake) published(now time.Time) {
	if in.m.opts.StateDir == nil {
		return
	}
	if in.saveDue.IsZero() {
		in.saveDue = now
		if next := in.lastSav.Add(in.m.opts.SaveInterval); next.After(now) {
			in.saveDue = next
		}
	}
}

// save hands a snapshot of the state to the saver.
func (in *intake) save(now time.Time) {
	in.m.saver.offer(in.snapshot())
	in.saveDue, in.lastSav = time.Time{}, now
}
