package manager

import "time"

// The readiness gate. The first publish waits until every source is
// accounted for: synced; or optional and serving its persisted services
// (warm start); or optional and past its startup timeout (served as
// empty). A required source keeps the gate closed until it really synced.
// And the gate never opens on timeouts alone: at least one source must
// have synced or be warm, so that one slow source cannot make the first
// publish an empty world.

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

// DefaultStartupTimeout is the startup timeout the configuration gives a
// source that sets none.
const DefaultStartupTimeout = 30 * time.Second

// warmWait is how long a source with persisted state has to sync before
// that state is served instead: short, so that a bridge restarted during a
// registry outage serves within a second, and long enough that a healthy
// registry usually answers first and nothing stale is served at all.
const warmWait = 300 * time.Millisecond

func (in *intake) setPhase(i int, phase string) {
	in.phases[i] = phase
	if v := in.m.opts.Sources[i].view; v != nil {
		v.setStartup(phase)
	}
}

// gate reports whether the first publish may happen.
func (in *intake) gate() bool {
	if in.open || len(in.phases) == 0 {
		return true
	}
	serving := false
	for i, ph := range in.phases {
		switch {
		case ph == PhaseSynced || ph == PhaseWarm || ph == PhaseReplacing:
			serving = true
		case ph == PhaseTimedOut && !in.m.opts.Sources[i].Startup.Required:
		default:
			return false
		}
	}
	return serving
}

// pending returns the sources the gate waits for.
func (in *intake) pending() []bool {
	out := make([]bool, len(in.phases))
	for i, ph := range in.phases {
		out[i] = ph == PhaseWaiting || ph == PhaseTimedOut
	}
	return out
}
