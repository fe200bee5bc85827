package sources

import (
	"maps"
	"time"
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
	// startup timeout; it is served as empty, stale, until it syncs.
	PhaseTimedOut = "timed_out"
)

// GuardSnapshot describes a removal hold in progress (see guard.go).
type GuardSnapshot struct {
	Since         time.Time `json:"held_since"`
	Until         time.Time `json:"held_until"`
	Reason        string    `json:"reason"`
	HeldServices  int       `json:"held_services"`
	HeldEndpoints int       `json:"held_endpoints"`
}

// PolicySnapshot is the part of a StatusSnapshot that the manager fills in:
// the startup phase, the removal guard, and the services whose latest
// version could not be served.
type PolicySnapshot struct {
	Startup    string         `json:"startup"`
	Guard      *GuardSnapshot `json:"guard,omitempty"`
	GuardHolds uint64         `json:"guard_holds"`
	// ServiceErrors maps a service of this source to why its latest
	// version is not served (its last good version is).
	ServiceErrors map[string]string `json:"service_errors,omitempty"`
}

// stale reports whether the phase means the source serves something other
// than a fresh read.
func (p *PolicySnapshot) stale() bool {
	return p.Startup == PhaseWarm || p.Startup == PhaseTimedOut
}

func (p *PolicySnapshot) clone() PolicySnapshot {
	c := *p
	if p.Startup == "" {
		c.Startup = PhaseWaiting
	}
	if p.Guard != nil {
		g := *p.Guard
		c.Guard = &g
	}
	c.ServiceErrors = maps.Clone(p.ServiceErrors)
	return c
}

func (s *Status) setStartup(phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy.Startup = phase
}

func (s *Status) setGuard(g *GuardSnapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g != nil && s.policy.Guard == nil {
		s.policy.GuardHolds++
	}
	s.policy.Guard = g
}

// ServiceFailed records that the latest version of service could not be
// served (err nil clears it).
func (s *Status) ServiceFailed(service string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.policy.ServiceErrors, service)
		return
	}
	if s.policy.ServiceErrors == nil {
		s.policy.ServiceErrors = map[string]string{}
	}
	s.policy.ServiceErrors[service] = err.Error()
}

// forgetServices clears the errors of the named services, whose new
// version is about to be served or which are gone.
func (s *Status) forgetServices(names func(yield func(string) bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.policy.ServiceErrors) == 0 {
		return
	}
	for n := range names {
		delete(s.policy.ServiceErrors, n)
	}
}
