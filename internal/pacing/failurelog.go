package pacing

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultLogEvery is the least time between two lines about a dependency
// that keeps failing.
const DefaultLogEvery = time.Minute

// FailureLog writes the log of one failing dependency by the bridge's
// rule: the first failure of a failing period is logged as it happens; the
// failures after it at most once per Every, as one line saying how many
// there were since the previous line ("failures") and how long the
// dependency has been failing ("failing_for"), with the latest error; the
// first success after a failing period once, saying how many failures the
// period counted and how long it lasted ("failed_for"). A dependency
// failing a thousand times a minute thus writes a line a minute, and the
// log still shows when it broke, that it kept failing, and when it came
// back.
//
// Set Log, FailingMsg and RecoveredMsg; the rest is optional. A FailureLog
// is safe for concurrent use; it must not be copied after first use.
type FailureLog struct {
	// Log receives the lines.
	Log *slog.Logger
	// FailingMsg is the message of the failure lines (what failed and
	// what the bridge does about it), RecoveredMsg that of the recovery
	// line.
	FailingMsg, RecoveredMsg string
	// Level is that of the failure lines; nil means Warn. The recovery is
	// logged at Info.
	Level slog.Leveler
	// Every is the least time between two failure lines; 0 means
	// DefaultLogEvery.
	Every time.Duration
	// NewErrors logs a failure at once when its error's text differs
	// from the previous failure's, whenever the last line was. It suits a
	// dependency whose error changes only when its content does (a file
	// rewritten, each version wrong in its own way), where a new error is
	// news; never a network peer, whose errors carry ephemeral ports and
	// would be logged at every attempt.
	NewErrors bool
	// Now is the clock, for tests; nil means time.Now.
	Now func() time.Time

	mu       sync.Mutex
	lastErr  string
	since    time.Time // start of the failing period; zero while healthy
	lastLine time.Time
	unlogged int // failures since the last line
	total    int // failures in the period
}

func (f *FailureLog) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Failed records one failure, err, of the dependency that attrs (if any)
// describe. It logs the first failure of a period, and a later one when
// Every has passed since the last line (or, with NewErrors, when err is
// new). It reports whether it wrote a line.
func (f *FailureLog) Failed(err error, attrs ...any) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	f.unlogged++
	f.total++
	every := f.Every
	if every <= 0 {
		every = DefaultLogEvery
	}
	changed := f.NewErrors && err.Error() != f.lastErr
	f.lastErr = err.Error()
	switch {
	case f.since.IsZero():
		f.since = now
	case now.Sub(f.lastLine) < every && !changed:
		return false
	default:
		attrs = append(attrs, "failures", f.unlogged, "failing_for", now.Sub(f.since).Round(time.Second).String())
	}
	level := slog.LevelWarn
	if f.Level != nil {
		level = f.Level.Level()
	}
	f.Log.Log(context.Background(), level, f.FailingMsg, append(attrs, "err", err)...)
	f.lastLine, f.unlogged = now, 0
	return true
}

// Failing reports whether a failing period is under way.
func (f *FailureLog) Failing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.since.IsZero()
}

// Recovered records a success. After a failing period it logs
// RecoveredMsg once at Info, with attrs, "failures" (the period's count)
// and "failed_for", and reports true; otherwise it does nothing.
func (f *FailureLog) Recovered(attrs ...any) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since.IsZero() {
		return false
	}
	attrs = append(attrs, "failures", f.total, "failed_for", f.now().Sub(f.since).Round(time.Millisecond).String())
	f.Log.Info(f.RecoveredMsg, attrs...)
	f.since, f.lastLine, f.unlogged, f.total, f.lastErr = time.Time{}, time.Time{}, 0, 0, ""
	return true
}
