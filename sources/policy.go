package sources

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

// Guard configures the removal guard of one source (see guard.go). The zero
// value (Hold 0) turns the guard off, so every removal applies at once.
type Guard struct {
	// MaxRemovedFraction is the share of the source's services, or of one
	// service's endpoints, that one change may remove without being held.
	MaxRemovedFraction float64
	// Hold is how long a suspicious change waits once the source stops
	// bringing back what it removed; at most maxHoldFactor times Hold in all.
	Hold time.Duration
}

// Defaults of the per-source policies, as the configuration applies them.
const (
	DefaultStartupTimeout     = 30 * time.Second
	DefaultMaxRemovedFraction = 0.5
	DefaultGuardHold          = 30 * time.Second
)

func (g Guard) enabled() bool { return g.Hold > 0 }
