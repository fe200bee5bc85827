package sources

import (
	"context"
	"log/slog"
	"time"
)

// Changes is what the Manager publishes: the merged services that were
// added or changed since the previous publish, and the names of services
// that no longer exist in any source. Upserted is sorted by name and each
// service's endpoints are in canonical order (Service.Sort).
type Changes struct {
	Upserted []Service
	Removed  []string
}

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
	Logger              *slog.Logger
}

// Manager runs the configured sources, merges their services by precedence
// and publishes coalesced changes.
type Manager struct {
	opts ManagerOptions
}

// NewManager returns a manager for opts.
func NewManager(opts ManagerOptions) *Manager {
	return &Manager{opts: opts}
}

// Run starts every source and calls publish, always from the same goroutine,
// with the merged changes. The first publish happens once every source has
// sent its first (Full) update and carries the complete merged state; later
// publishes carry only what changed. Run returns when ctx is done, after
// every source has returned.
func (m *Manager) Run(ctx context.Context, publish func(Changes)) error {
	panic("not implemented")
}

// Pending returns the names of the sources that have not completed their
// first sync, in configuration order.
func (m *Manager) Pending() []string {
	panic("not implemented")
}
