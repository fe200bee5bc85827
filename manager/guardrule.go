package manager

import (
	"fmt"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Guard configures the removal guard of one source (see guard.go for what
// a hold does). The zero value (Hold 0) turns the guard off: every removal
// applies at once.
//
// The guard must hold what a broken or restarting registry looks like and
// let every ordinary removal through at once. Its measure is the source's
// live services, those with at least one endpoint. A service goes dark
// when it loses its last endpoint or disappears: to a client both mean no
// traffic, so a source that empties a service (the DNS source on NXDOMAIN,
// Consul's on_empty: empty) and one that removes it (on_empty: remove) are
// judged alike. The rules, in the order judge applies them to each update:
//
//   - Reset: the update says the registry lost its state and is refilling
//     (Update.Reset). The source knows; nothing is measured.
//   - Emptied: the source had live services and the update leaves none,
//     whatever the source's size: an http registry answering an empty
//     list, a services file truncated to `services: []`, a resolver
//     answering NXDOMAIN for every name (the services stay, empty), an ACL
//     token that suddenly sees nothing.
//   - Mass removal: the update darkens at least MinRemoved services and
//     more than MaxRemovedFraction of the live ones: a registry answering
//     with part of its catalog.
//   - Per service, only with PerService: the update removes at least
//     MinRemoved endpoints and more than MaxRemovedFraction of one
//     service's.
//
// Why services that go dark rather than endpoints removed: losses that
// leave each service at least one endpoint are what a node failure, a
// scale-down or a redeploy look like, and clients must stop sending to
// those endpoints at once; a failing registry loses whole services. Why a
// floor (MinRemoved): an edit of a services file, a deregistration or one
// name answering NXDOMAIN darkens one to three services at once, and in a
// small source that is already most of it, while a registry failure
// darkens most of the catalog, a dozen services or far more. So with the
// defaults a service's last instance deregistered, a scale-down to one
// instance, one NXDOMAIN among several names, an SRV target dropped and a
// few services deleted from a file all apply at once, while a registry
// answering with less than half of its catalog is held (once the part
// missing is MinRemoved services or more). The price: a
// source of at most MinRemoved live services is held only when it
// empties, and a source that loses its services over several small
// updates is held only at the last one.
type Guard struct {
	// Hold is how long a held change waits once the source stops bringing
	// back what it dropped; at most maxHoldFactor times Hold in all.
	Hold time.Duration
	// MaxRemovedFraction is the share of the live services (or, with
	// PerService, of one service's endpoints) that one update may take
	// away without being held.
	MaxRemovedFraction float64
	// MinRemoved is the fewest services (or endpoints of one service) an
	// update must take away to be a mass removal.
	MinRemoved int
	// PerService also holds an update that removes most of one service's
	// endpoints.
	PerService bool
}

// Defaults of the guard, as the configuration applies them (Guard explains
// them).
const (
	DefaultGuardHold          = 30 * time.Second
	DefaultMaxRemovedFraction = 0.5
	DefaultMinRemoved         = 5
)

func (g Guard) enabled() bool { return g.Hold > 0 }

// many reports whether n of total is a mass removal.
func (g Guard) many(n, total int) bool {
	return n >= g.MinRemoved && float64(n) > g.MaxRemovedFraction*float64(total)
}

// verdict is what judge found in one update.
type verdict struct {
	reason string // why the update's removals must be held; "" when not
	live   int    // the live services once the update applies
}

// judge applies the rules above to update u of a source that now serves
// cur, live of whose services have endpoints. It costs the size of u (a
// partial update) or of the source (a Full one, which carries it all).
func (g Guard) judge(cur map[string]sources.Service, live int, u sources.Update) verdict {
	// next is the last word of u on each name it touches: nil for gone,
	// as applyUpdate would leave it.
	next := make(map[string]*sources.Service, len(u.Services)+len(u.Removed))
	if u.Full {
		for name := range cur {
			next[name] = nil
		}
	} else {
		for _, name := range u.Removed {
			next[name] = nil
		}
	}
	for i := range u.Services {
		next[u.Services[i].Name] = &u.Services[i]
	}
	v := verdict{live: live}
	dark, perService := 0, ""
	for name, s := range next {
		old, had := cur[name]
		was, is := had && len(old.Endpoints) > 0, s != nil && len(s.Endpoints) > 0
		switch {
		case was && !is:
			v.live--
			dark++
		case is && !was:
			v.live++
		}
		if g.PerService && was && perService == "" {
			gone := len(old.Endpoints)
			if s != nil {
				gone = len(missing(old, *s))
			}
			if g.many(gone, len(old.Endpoints)) {
				perService = fmt.Sprintf("service %s: %d of its %d endpoints removed", name, gone, len(old.Endpoints))
			}
		}
	}
	switch {
	case u.Reset && len(cur) > 0:
		v.reason = "the source reports that its registry reset"
	case live > 0 && v.live == 0:
		v.reason = fmt.Sprintf("source emptied: no service has endpoints left (%d had)", live)
	case g.many(dark, live):
		v.reason = fmt.Sprintf("mass removal: %d of the %d services with endpoints lost every endpoint", dark, live)
	default:
		v.reason = perService
	}
	return v
}

// countLive returns how many services of state have endpoints.
func countLive(state map[string]sources.Service) int {
	n := 0
	for _, s := range state {
		if len(s.Endpoints) > 0 {
			n++
		}
	}
	return n
}
