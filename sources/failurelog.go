package sources

import "github.com/xdsbridge/xdsbridge/internal/pacing"

// FailureLog logs the failures of one dependency the way an operator reads
// them: one line when a failing period starts (Failed), then at most one
// a minute (Every) with the number of failures since the previous line
// ("failures"), how long the dependency has been failing ("failing_for")
// and the latest error, and one line when it recovers (Recovered), with
// the period's failures and length ("failed_for"). A source that retries
// many times a second thus logs a line a minute, and each says how much
// failed.
//
// Set Log (scoped to the source), FailingMsg and RecoveredMsg. Level is
// that of the failure lines (nil: Warn). NewErrors also logs at once a
// failure whose error text is new, for dependencies whose errors change
// only when their content does (a file), never for network peers. Failed
// and Recovered take attributes that name the dependency. A FailureLog is
// safe for concurrent use.
type FailureLog = pacing.FailureLog
