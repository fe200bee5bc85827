package sources

import (
	"maps"
	"sync"
	"time"
)

// Status records how a source's reads of its registry went. Sources call
// Succeeded, Failed, Dropped and Note; whoever runs the source (the
// manager, which adds what it does with the source's updates before the
// admin API and the metrics show it) reads it with Snapshot. It is safe for
// concurrent use.
//
// A source is stale while its last read failed: it keeps serving the state
// of its last successful read, which is LastSuccess old.
type Status struct {
	name string
	now  func() time.Time

	mu          sync.Mutex
	synced      bool
	lastSuccess time.Time
	lastError   string
	failingFrom time.Time
	failures    uint64
	dropped     uint64
	notes       map[string]string

	// failures (above) counts the failed reads since the last successful
	// one; failuresTotal every failed read since the source started.
	failuresTotal uint64
}

// NewStatus returns the status of the source called name.
func NewStatus(name string) *Status {
	return &Status{name: name, now: time.Now}
}

// Succeeded records a successful read of the whole registry view the source
// owns. The first call marks the source as synced.
func (s *Status) Succeeded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = true
	s.lastSuccess = s.now()
	s.lastError = ""
	s.failingFrom = time.Time{}
	s.failures = 0
}

// Failed records a failed read. It reports whether this failure starts a new
// failing period (the previous read succeeded, or none happened), so that a
// source can log once per state change rather than once per retry.
func (s *Status) Failed(err error) (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	s.failuresTotal++
	first = s.failingFrom.IsZero()
	if first {
		s.failingFrom = s.now()
	}
	s.lastError = err.Error()
	return first
}

// Dropped counts n endpoints the source could not serve (bad address, bad
// port, malformed record) and left out of an otherwise good read.
func (s *Status) Dropped(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.dropped += uint64(n)
	s.mu.Unlock()
}

// Note sets a standing remark about the source's data that is not a
// failure (results hidden by ACLs, say) under key; an empty msg clears it.
func (s *Status) Note(key, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg == "" {
		delete(s.notes, key)
		return
	}
	if s.notes == nil {
		s.notes = map[string]string{}
	}
	s.notes[key] = msg
}

// StatusSnapshot is a copy of a Status at one moment. Stale is true while
// the last read failed (the manager's view of the source may add reasons).
//
// Failures counts the consecutive failed reads of the current failing
// period, 0 once a read succeeds again: a source that recovered must not
// look as if it were still failing. FailuresTotal counts every failed read
// since the source started, which is what a rate needs.
type StatusSnapshot struct {
	Name        string            `json:"name"`
	Synced      bool              `json:"synced"`
	Stale       bool              `json:"stale"`
	LastSuccess time.Time         `json:"last_success,omitzero"`
	FailingFrom time.Time         `json:"failing_since,omitzero"`
	LastError   string            `json:"last_error,omitempty"`
	Failures    uint64            `json:"failures"`
	Dropped     uint64            `json:"dropped_endpoints"`
	Notes       map[string]string `json:"notes,omitempty"`

	FailuresTotal uint64 `json:"failures_total"`
}

// Snapshot returns a copy of the current status.
func (s *Status) Snapshot() StatusSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return StatusSnapshot{
		Name:          s.name,
		Synced:        s.synced,
		Stale:         !s.failingFrom.IsZero(),
		LastSuccess:   s.lastSuccess,
		FailingFrom:   s.failingFrom,
		LastError:     s.lastError,
		Failures:      s.failures,
		FailuresTotal: s.failuresTotal,
		Dropped:       s.dropped,
		Notes:         maps.Clone(s.notes),
	}
}
