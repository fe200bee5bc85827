package manager

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Startup phases of a source, as /sources shows them.
const (
	// PhaseWaiting: no first sync yet; the readiness gate waits for it.
	PhaseWaiting = "waiting"
	// PhaseSynced: the source delivered its state at least once.
	PhaseSynced = "synced"
	// PhaseWarm: not synced yet; its persisted services are served, stale.
	PhaseWarm = "warm"
	// PhaseTimedOut: an optional source that did not sync within its
	// startup timeout; it is served as empty, stale, until it syncs. A
	// changed source whose new instance did not sync within its startup
	// timeout is served with its previous instance's last services, stale,
	// until the new one syncs.
	PhaseTimedOut = "timed_out"
	// PhaseReplacing: the source's entry changed and its new instance has
	// not synced yet; its previous instance runs beside it and what that
	// one reports is served (replace.go).
	PhaseReplacing = "replacing"
)

// GuardSnapshot describes a removal hold in progress (see guard.go).
type GuardSnapshot struct {
	Since         time.Time `json:"held_since"`
	Until         time.Time `json:"held_until"`
	Reason        string    `json:"reason"`
	HeldServices  int       `json:"held_services"`
	HeldEndpoints int       `json:"held_endpoints"`
}

// SourceStatus is one source as /sources and the metrics show it: how its
// reads of the registry went, as the source itself reports them
// (sources.StatusSnapshot), and what the manager does with its updates:
// the startup phase, the removal guard, the services whose latest version
// could not be served and those the merge shadows.
//
// Stale is true while the source's last read failed and also while the
// source serves persisted state (PhaseWarm) or nothing (PhaseTimedOut)
// rather than a fresh read.
type SourceStatus struct {
	sources.StatusSnapshot
	Startup    string         `json:"startup"`
	Guard      *GuardSnapshot `json:"guard,omitempty"`
	GuardHolds uint64         `json:"guard_holds"`
	// ServiceErrors maps a service of this source to why its latest
	// version is not served (its last good version is).
	ServiceErrors map[string]string `json:"service_errors,omitempty"`
	// Shadowed counts the services whose endpoints this source reports but
	// the merge does not serve; ShadowedServices names the first few.
	Shadowed         int      `json:"shadowed"`
	ShadowedServices []string `json:"shadowed_services,omitempty"`
}

// statusView is the manager's part of a source's status (see
// SourceStatus). The manager's loop writes it; Manager.Statuses reads it
// from any goroutine.
type statusView struct {
	mu            sync.Mutex
	phase         string
	guard         *GuardSnapshot
	guardHolds    uint64
	serviceErrors map[string]string
	shadowed      map[string]struct{}
}

// snapshot returns the status of the source n: its Status and its view.
func (n Named) snapshot() SourceStatus {
	s := SourceStatus{StatusSnapshot: sources.StatusSnapshot{Name: n.Name}}
	if n.Status != nil {
		s.StatusSnapshot = n.Status.Snapshot()
	}
	if v := n.view; v != nil {
		v.fill(&s)
	}
	if s.Startup == "" {
		s.Startup = PhaseWaiting
	}
	return s
}

// fill copies the view into s.
func (v *statusView) fill(s *SourceStatus) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s.Startup = v.phase
	s.Stale = s.Stale || v.phase == PhaseWarm || v.phase == PhaseTimedOut
	if v.guard != nil {
		g := *v.guard
		s.Guard = &g
	}
	s.GuardHolds = v.guardHolds
	s.ServiceErrors = maps.Clone(v.serviceErrors)
	s.Shadowed = len(v.shadowed)
	s.ShadowedServices = v.shadowedNames()
}

func (v *statusView) setStartup(phase string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.phase = phase
}

func (v *statusView) setGuard(g *GuardSnapshot) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if g != nil && v.guard == nil {
		v.guardHolds++
	}
	v.guard = g
}

// serviceFailed records that the latest version of service could not be
// served (err nil clears it).
func (v *statusView) serviceFailed(service string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err == nil {
		delete(v.serviceErrors, service)
		return
	}
	if v.serviceErrors == nil {
		v.serviceErrors = map[string]string{}
	}
	v.serviceErrors[service] = err.Error()
}

// forgetServices clears the errors of the named services, whose new
// version is about to be served or which are gone.
func (v *statusView) forgetServices(names func(yield func(string) bool)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.serviceErrors) == 0 {
		return
	}
	for n := range names {
		delete(v.serviceErrors, n)
	}
}

// maxShadowedNames bounds the names a status snapshot lists, so that
// /sources stays small when thousands of services are shadowed; the count
// is always complete.
const maxShadowedNames = 20

// setShadowed records whether the merge leaves out this source's endpoints
// of service name (see MergeFirst and MergeWeighted).
func (v *statusView) setShadowed(name string, on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !on {
		delete(v.shadowed, name)
		return
	}
	if v.shadowed == nil {
		v.shadowed = map[string]struct{}{}
	}
	v.shadowed[name] = struct{}{}
}

// shadowedNames returns the first maxShadowedNames shadowed services in
// name order, in one pass over the set. The caller holds v.mu.
func (v *statusView) shadowedNames() []string {
	if len(v.shadowed) == 0 {
		return nil
	}
	names := make([]string, 0, maxShadowedNames+1)
	for n := range v.shadowed {
		i, _ := slices.BinarySearch(names, n)
		if i < maxShadowedNames {
			names = slices.Insert(names, i, n)
			names = names[:min(len(names), maxShadowedNames)]
		}
	}
	return names
}
