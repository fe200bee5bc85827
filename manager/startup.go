package manager

import "time"

// Startup says how long the readiness gate waits for a source's first sync.
// The zero value waits for ever, as a required source does.
type Startup struct {
	// Timeout is how long an optional source may take to sync before the
	// gate stops waiting for it; 0 means no limit.
	Timeout time.Duration
	// Required sources keep the gate closed until they have synced for
	// real: neither a timeout nor persisted state stands in for them.
	Required bool
}

// Defaults of the per-source policies, as the configuration applies them.
// The guard's are explained with Guard.
const (
	DefaultStartupTimeout     = 30 * time.Second
	DefaultGuardHold          = 30 * time.Second
	DefaultMaxRemovedFraction = 0.5
	DefaultMinRemoved         = 5
)
