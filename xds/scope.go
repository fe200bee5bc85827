package xds

import (
	"math/bits"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// MaxScopes is the number of scopes the engine tells apart (IDs 1 to
// MaxScopes; 0 is unscoped): a scope is a bit of every resource's
// ScopeSet.
const MaxScopes = 64

// ScopeSet is a set of scope IDs, 1 to MaxScopes.
type ScopeSet uint64

// With returns s with scope id added; an ID out of range adds nothing.
func (s ScopeSet) With(id int) ScopeSet {
	if id < 1 || id > MaxScopes {
		return s
	}
	return s | 1<<(id-1)
}

// Has reports whether scope id is in s.
func (s ScopeSet) Has(id int) bool { return id >= 1 && id <= MaxScopes && s&(1<<(id-1)) != 0 }

// maxID is the largest ID in s, 0 if none.
func (s ScopeSet) maxID() int { return 64 - bits.LeadingZeros64(uint64(s)) }

// Scoper tells the engine which scope a node is in: its ID (0: unscoped,
// served every resource as without scopes; else 1 to MaxScopes) and the
// name the admin API shows. It is called once per stream, when its node
// is known, and for every stream by SetScopes; it must be fast and
// deterministic.
type Scoper func(n *corev3.Node) (id int, name string)

// scoping is the server's current Scoper (nil: every node unscoped),
// which SetScopes replaces at any time, and streams read without a lock.
type scoping struct {
	f atomic.Pointer[Scoper]
}

// set makes f the current Scoper.
func (sc *scoping) set(f Scoper) {
	if f == nil {
		sc.f.Store(nil)
	} else {
		sc.f.Store(&f)
	}
}

// of is the scope of node n by the current Scoper.
func (sc *scoping) of(n *corev3.Node) (int, string) {
	f := sc.f.Load()
	if f == nil {
		return 0, ""
	}
	id, name := (*f)(n)
	if id < 0 || id > MaxScopes {
		return 0, name
	}
	return id, name
}
