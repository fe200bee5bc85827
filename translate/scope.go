package translate

import (
	"fmt"
	"path"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Scopes are the per-node scoping rules (the configuration's `scopes`):
// which services a node receives on a wildcard subscription. A node's
// scope is the first rule whose Node matches it, else Default. Every
// service a node asks for by name is served whatever its scope, unless
// the scope denies it. A nil *Scopes scopes nothing: every node gets
// every service.
type Scopes struct {
	Rules []Scope
	// Default is the scope of a node no rule matches; nil: such a node is
	// unscoped and gets every service, as without scopes.
	Default *Scope
}

// Scope is one scope: the nodes it is for and the services it delivers.
// ID is its number for the engine, 1 to MaxScopes, set by NewScopes.
type Scope struct {
	Name string
	ID   int
	Node NodeMatch
	// Services select what a wildcard delivers: a service matching any of
	// them (nil: every service). Deny select the services never served to
	// the scope's nodes, not even by name.
	Services []sources.Selector
	Deny     []sources.Selector
}

// MaxScopes is the number of scopes, the default included, a
// configuration may have: the engine tells at most that many apart.
const MaxScopes = 64

// DefaultScopeName names the scope of the nodes no rule matches when that
// scope delivers nothing by wildcard.
const DefaultScopeName = "default"

// NodeMatch selects nodes: every field set must match (the zero value
// matches every node). ID and Cluster are globs (path.Match syntax);
// Metadata entries must be string fields of the node's metadata with
// exactly these values; Locality fields set must be equal.
type NodeMatch struct {
	ID       string
	Cluster  string
	Metadata map[string]string
	Locality sources.Locality
}

// NewScopes numbers the rules (in order, from 1) and the default, and
// checks the globs and the number of scopes. Errors are *settings.KeyError
// values relative to the `scopes` key.
func NewScopes(rules []Scope, def *Scope) (*Scopes, error) {
	n := len(rules)
	if def != nil {
		n++
	}
	if n > MaxScopes {
		return nil, settings.Errorf("rules", "%d scopes, at most %d are allowed (the default counts when it is none)", n, MaxScopes)
	}
	seen := map[string]int{}
	for i := range rules {
		r := &rules[i]
		key := fmt.Sprintf("rules[%d]", i)
		if r.Name == "" {
			return nil, settings.Errorf(key+".name", "is required (it names the scope in /clients and /debug/why)")
		}
		if j, dup := seen[r.Name]; dup {
			return nil, settings.Errorf(key+".name", "%q is also the name of rules[%d]; names must be unique", r.Name, j)
		}
		if r.Name == DefaultScopeName && def != nil {
			return nil, settings.Errorf(key+".name", "%q names the default scope; choose another name", r.Name)
		}
		seen[r.Name] = i
		for field, g := range map[string]string{"id": r.Node.ID, "cluster": r.Node.Cluster} {
			if _, err := path.Match(g, ""); err != nil {
				return nil, settings.Errorf(key+".node."+field, "bad glob %q: %v", g, err)
			}
		}
		for list, sels := range map[string][]sources.Selector{"services": r.Services, "deny": r.Deny} {
			for j, s := range sels {
				if err := s.Validate(); err != nil {
					return nil, settings.Prefix(fmt.Sprintf("%s.%s[%d]", key, list, j), err)
				}
			}
		}
		r.ID = i + 1
	}
	if def != nil {
		def.ID = len(rules) + 1
	}
	return &Scopes{Rules: rules, Default: def}, nil
}

// ID is the ID of the scope named name: a rule's, or the default's when
// the default delivers nothing by wildcard (scopes.default: none).
func (s *Scopes) ID(name string) (int, bool) {
	if s == nil {
		return 0, false
	}
	for _, sc := range s.all() {
		if sc.Name == name {
			return sc.ID, true
		}
	}
	return 0, false
}

// Match returns the scope of node n and the index of the rule that chose
// it (-1: the default), or nil when n is unscoped.
func (s *Scopes) Match(n *corev3.Node) (*Scope, int) {
	if s == nil {
		return nil, -1
	}
	for i := range s.Rules {
		if s.Rules[i].Node.matches(n) {
			return &s.Rules[i], i
		}
	}
	return s.Default, -1
}

// Of is the engine's view of Match: the scope's ID and name, 0 and ""
// when n is unscoped (see xds.Scoper).
func (s *Scopes) Of(n *corev3.Node) (int, string) {
	if sc, _ := s.Match(n); sc != nil {
		return sc.ID, sc.Name
	}
	return 0, ""
}

func (m NodeMatch) matches(n *corev3.Node) bool {
	if !glob(m.ID, n.GetId()) || !glob(m.Cluster, n.GetCluster()) {
		return false
	}
	l := n.GetLocality()
	if !equal(m.Locality.Region, l.GetRegion()) || !equal(m.Locality.Zone, l.GetZone()) ||
		!equal(m.Locality.SubZone, l.GetSubZone()) {
		return false
	}
	fields := n.GetMetadata().GetFields()
	for k, want := range m.Metadata {
		v, ok := fields[k]
		if _, isString := v.GetKind().(*structpb.Value_StringValue); !ok || !isString || v.GetStringValue() != want {
			return false
		}
	}
	return true
}

func glob(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	ok, _ := path.Match(pattern, s)
	return ok
}

func equal(want, got string) bool { return want == "" || want == got }

// Membership is what the scopes do with a service: the IDs of the scopes
// whose wildcard delivers it (in) and of those it is denied to, as the
// engine's bitsets (xds.ScopeSet: bit id-1).
func (s *Scopes) Membership(svc sources.Service) (in, denied uint64) {
	if s == nil {
		return 0, 0
	}
	for _, sc := range s.all() {
		switch sc.Explain(svc).Verdict {
		case Delivered:
			in |= 1 << (sc.ID - 1)
		case Denied:
			denied |= 1 << (sc.ID - 1)
		}
	}
	return in, denied
}

// Every is the IDs of every scope, the rules' and the default's, as the
// engine's bitset: the scopes of a resource that no scope narrows (nil
// scopes: none, as every node is unscoped).
func (s *Scopes) Every() uint64 {
	if s == nil {
		return 0
	}
	var every uint64
	for _, sc := range s.all() {
		every |= 1 << (sc.ID - 1)
	}
	return every
}

// all is the rules and the default.
func (s *Scopes) all() []*Scope {
	out := make([]*Scope, 0, len(s.Rules)+1)
	for i := range s.Rules {
		out = append(out, &s.Rules[i])
	}
	if s.Default != nil {
		out = append(out, s.Default)
	}
	return out
}

// Verdict is what a scope does with one service.
type Verdict string

// The verdicts: delivered by a wildcard, served only when asked for by
// name, or never served.
const (
	Delivered Verdict = "delivered"
	NamedOnly Verdict = "named only"
	Denied    Verdict = "denied"
)

// Explanation says what a scope does with a service and which selector
// decided (an index into Services or Deny; -1 when none did).
type Explanation struct {
	Verdict  Verdict
	Selector int
}

// Explain is the scope's verdict on svc. A deny selector wins over the
// services selectors.
func (sc *Scope) Explain(svc sources.Service) Explanation {
	if i := slices.IndexFunc(sc.Deny, func(s sources.Selector) bool { return s.MatchService(svc) }); i >= 0 {
		return Explanation{Verdict: Denied, Selector: i}
	}
	if sc.Services == nil {
		return Explanation{Verdict: Delivered, Selector: -1}
	}
	if i := slices.IndexFunc(sc.Services, func(s sources.Selector) bool { return s.MatchService(svc) }); i >= 0 {
		return Explanation{Verdict: Delivered, Selector: i}
	}
	return Explanation{Verdict: NamedOnly, Selector: -1}
}
