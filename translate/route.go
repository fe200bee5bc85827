package translate

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// DefaultTagPrefix is RouteRule.TagPrefix when the rule does not set it:
// the prefix of Fabio's route tags (urlprefix-/api,
// urlprefix-api.example.com/v1 strip=/v1).
const DefaultTagPrefix = "urlprefix-"

// ServicePlaceholder is replaced by the service's name in a host template.
const ServicePlaceholder = "{service}"

// RouteRule is one entry of the `routes` section: the services it selects
// (Match) send requests to their cluster from the route configuration
// named Config, on the hosts and paths it finds for each. A service claims
// a host and a path prefix
//   - for each host template of Hosts ("{service}.example.com"), on each
//     of Paths ("/" when empty);
//   - for each endpoint tag starting with TagPrefix, written as Fabio's
//     users write them: `urlprefix-[host]/path [strip=/prefix]` (no host:
//     any host);
//   - for each such spec, comma-separated, in the endpoint metadata entry
//     MetadataKey.
//
// A tag or a metadata entry on any endpoint of the service claims the route
// for the whole service. Build it with NewRouteRule.
type RouteRule struct {
	Config      string
	Match       sources.Selector
	Hosts       []string
	Paths       []string
	TagPrefix   string
	MetadataKey string
	// fragment is the per-route options (an Envoy Route fragment), nil
	// when the rule has none; constrained says its RouteMatch narrows the
	// route beyond the path (headers, query parameters...), and matchKey
	// identifies those constraints: two claims of one host and path with
	// different constraints are two routes, not a conflict.
	fragment    *routev3.Route
	constrained bool
	matchKey    string
}

// Routes are the rules of the `routes` section, in order. A nil *Routes
// builds nothing.
type Routes struct {
	Rules []RouteRule
}

// routeOwned are the Route fields a fragment may not set: the bridge
// names the route and decides where it goes.
var routeOwned = []protoreflect.Name{"name", "redirect", "direct_response", "filter_action", "non_forwarding_action"}

// NewRouteRule checks r and compiles its per-route options, fragment: an
// Envoy Route fragment written as in an Envoy configuration, whose match
// may narrow the route (headers, query_parameters) but not set its path,
// and whose route (a RouteAction: timeout, retry_policy, prefix_rewrite,
// hash_policy...) may not set the cluster. Errors are *settings.KeyError
// values relative to the rule.
func NewRouteRule(r RouteRule, fragment map[string]any) (RouteRule, error) {
	if r.Config == "" {
		return RouteRule{}, settings.Errorf("config", "is required (the name of the route configuration a listener's RDS names)")
	}
	if err := r.Match.Validate(); err != nil {
		return RouteRule{}, settings.Prefix("match", err)
	}
	for i, h := range r.Hosts {
		if _, err := expandHost(h, "example"); err != nil {
			return RouteRule{}, settings.Errorf(fmt.Sprintf("hosts[%d]", i), "%v", err)
		}
	}
	for i, p := range r.Paths {
		if err := checkPath(p); err != nil {
			return RouteRule{}, settings.Errorf(fmt.Sprintf("paths[%d]", i), "%v", err)
		}
	}
	if len(r.Paths) > 0 && len(r.Hosts) == 0 {
		return RouteRule{}, settings.Errorf("paths", "applies to the hosts of `hosts`, and there are none")
	}
	if len(r.Hosts) == 0 && r.TagPrefix == "" && r.MetadataKey == "" {
		return RouteRule{}, settings.Errorf("hosts", "the rule routes nothing: give hosts, or leave tag_prefix set, or a metadata_key")
	}
	if len(fragment) == 0 {
		return r, nil
	}
	f := &routev3.Route{}
	if _, err := decodeFragment(f, fragment, "route", routeOwned, "is set by the bridge: a route goes to its service's cluster"); err != nil {
		return RouteRule{}, err
	}
	if f.GetMatch().GetPathSpecifier() != nil {
		return RouteRule{}, settings.Errorf("route.match", "sets the path, which comes from paths, the tags or the metadata")
	}
	if f.GetRoute().GetClusterSpecifier() != nil {
		return RouteRule{}, settings.Errorf("route.route", "sets the cluster, which is the service's")
	}
	r.fragment = f
	if m := f.GetMatch(); m != nil && proto.Size(m) > 0 {
		b, err := deterministic.Marshal(m)
		if err != nil {
			return RouteRule{}, settings.Errorf("route.match", "%v", err)
		}
		r.constrained, r.matchKey = true, string(b)
	}
	// A sample route built with the fragment must validate, so that a
	// rule that cannot produce a valid route fails at load time.
	sample := r.route(Claim{Service: "example", Path: "/", Strip: "/"})
	if err := sample.ValidateAll(); err != nil {
		return RouteRule{}, invalidMessage("route", "the route", f.ProtoReflect().Descriptor(), err)
	}
	return r, nil
}

// Claim is one route a service claims: requests for Host (a domain as
// Envoy matches it, "*" for any) whose path starts with Path go to the
// service's cluster, Strip removed from the path's front.
type Claim struct {
	Config  string
	Host    string
	Path    string
	Strip   string
	Service string
	// Rule is the index of the rule in Routes.Rules; FromRegistry says
	// the claim came from a tag or metadata rather than a host template of
	// the configuration; Origin says which, for /debug/why.
	Rule         int
	FromRegistry bool
	Origin       string
}

// DroppedClaim is a tag or metadata entry that states a route the bridge
// cannot serve, with the reason.
type DroppedClaim struct {
	Service string
	Origin  string
	Reason  string
}

// Claims returns the routes svc claims by every rule that selects it, in
// a deterministic order, and the tags and metadata entries dropped for
// stating a route that cannot be served. It is pure.
func (rs *Routes) Claims(svc sources.Service) ([]Claim, []DroppedClaim) {
	if rs == nil {
		return nil, nil
	}
	var out []Claim
	var dropped []DroppedClaim
	for i, r := range rs.Rules {
		if !r.Match.MatchService(svc) {
			continue
		}
		for j, tmpl := range r.Hosts {
			host, err := expandHost(tmpl, svc.Name)
			if err != nil {
				dropped = append(dropped, DroppedClaim{Service: svc.Name, Origin: fmt.Sprintf("routes[%d].hosts[%d]", i, j), Reason: err.Error()})
				continue
			}
			paths := r.Paths
			if len(paths) == 0 {
				paths = []string{"/"}
			}
			for _, p := range paths {
				out = append(out, Claim{Config: r.Config, Host: host, Path: p, Service: svc.Name, Rule: i,
					Origin: fmt.Sprintf("routes[%d].hosts[%d] %s", i, j, tmpl)})
			}
		}
		specs := r.registrySpecs(svc)
		for _, s := range specs {
			host, path, strip, err := parseSpec(s.spec)
			if err != nil {
				dropped = append(dropped, DroppedClaim{Service: svc.Name, Origin: s.origin, Reason: err.Error()})
				continue
			}
			out = append(out, Claim{Config: r.Config, Host: host, Path: path, Strip: strip, Service: svc.Name, Rule: i,
				FromRegistry: true, Origin: s.origin})
		}
	}
	slices.SortFunc(out, compareClaims)
	out = slices.CompactFunc(out, func(a, b Claim) bool { return compareClaims(a, b) == 0 })
	slices.SortFunc(dropped, func(a, b DroppedClaim) int { return cmp.Compare(a.Origin, b.Origin) })
	dropped = slices.Compact(dropped)
	return out, dropped
}

// registrySpec is one route spec read from the registry and where.
type registrySpec struct{ spec, origin string }

// registrySpecs are the route specs of svc's tags (with the rule's tag
// prefix) and metadata entries, each once, sorted.
func (r RouteRule) registrySpecs(svc sources.Service) []registrySpec {
	var out []registrySpec
	for _, e := range svc.Endpoints {
		if r.TagPrefix != "" {
			for _, t := range e.Tags() {
				if spec, ok := strings.CutPrefix(t, r.TagPrefix); ok {
					out = append(out, registrySpec{spec: spec, origin: "tag " + t})
				}
			}
		}
		if r.MetadataKey != "" {
			if v, ok := e.Metadata[r.MetadataKey]; ok {
				for spec := range strings.SplitSeq(v, ",") {
					out = append(out, registrySpec{spec: strings.TrimSpace(spec), origin: "metadata " + r.MetadataKey + "=" + v})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b registrySpec) int {
		return cmp.Or(cmp.Compare(a.spec, b.spec), cmp.Compare(a.origin, b.origin))
	})
	return slices.Compact(out)
}

func compareClaims(a, b Claim) int {
	return cmp.Or(cmp.Compare(a.Config, b.Config), cmp.Compare(a.Host, b.Host), cmp.Compare(a.Path, b.Path),
		cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Service, b.Service), cmp.Compare(a.Strip, b.Strip),
		compareBool(a.FromRegistry, b.FromRegistry), cmp.Compare(a.Origin, b.Origin))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// parseSpec reads a route as Fabio's tags state it, after the prefix:
// `[host]/path` then options separated by spaces, of which strip=PREFIX is
// served (PREFIX removed from the front of the path before forwarding). A
// spec without a host is for any host.
func parseSpec(spec string) (host, path, strip string, err error) {
	fields := strings.Fields(spec)
	if len(fields) == 0 {
		return "", "", "", fmt.Errorf("empty route")
	}
	target := fields[0]
	slash := strings.IndexByte(target, '/')
	if slash < 0 {
		return "", "", "", fmt.Errorf("%q has no path (want [host]/path; TCP routes are not served)", target)
	}
	host, path = "*", target[slash:]
	if slash > 0 {
		if host, err = checkHost(target[:slash]); err != nil {
			return "", "", "", err
		}
	}
	if err := checkPath(path); err != nil {
		return "", "", "", err
	}
	for _, opt := range fields[1:] {
		k, v, _ := strings.Cut(opt, "=")
		switch k {
		case "strip":
			if err := checkPath(v); err != nil {
				return "", "", "", fmt.Errorf("strip: %w", err)
			}
			if !strings.HasPrefix(path, v) {
				return "", "", "", fmt.Errorf("strip=%s is not a prefix of the path %s", v, path)
			}
			strip = v
		default:
			return "", "", "", fmt.Errorf("option %q is not served (only strip=)", k)
		}
	}
	return host, path, strip, nil
}

var (
	hostPattern = regexp.MustCompile(`^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?$`)
	pathPattern = regexp.MustCompile(`^/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$`)
)

// checkHost returns host lower-cased if it is a domain Envoy can match: a
// DNS name, optionally with a leading "*." and a port.
func checkHost(host string) (string, error) {
	h := strings.ToLower(host)
	if len(h) > 253 || !hostPattern.MatchString(h) {
		return "", fmt.Errorf("host %q is not a DNS name (with an optional leading *. and :port)", host)
	}
	return h, nil
}

// checkPath checks a path prefix: it starts with a slash and holds only
// the characters of a URL path.
func checkPath(p string) error {
	if !pathPattern.MatchString(p) {
		return fmt.Errorf("path %q must start with / and hold only URL path characters", p)
	}
	return nil
}

// expandHost is a host template with the service's name in place of
// {service}.
func expandHost(tmpl, service string) (string, error) {
	return checkHost(strings.ReplaceAll(tmpl, ServicePlaceholder, service))
}

// Conflict is a route key (host, path and the rule's extra match) that
// several services claim: Winner is served, Losers are not.
type Conflict struct {
	Config string
	Host   string
	Path   string
	Winner Claim
	Losers []Claim
}

// RouteConfiguration builds the route configuration name from the claims
// of every service (in any order; those of other configurations are
// ignored) and validates it. Its virtual hosts are one per host, sorted,
// "*" (routes without a host) last; each host's routes go longest path
// first, so that the most specific prefix wins, and a host without a
// route for "/" of its own also gets the routes without a host after its
// own, so that a request no route of its host takes falls back to them,
// as Fabio does. Where services claim the same host and path (and the
// same extra match), the claim served is, in order: one from a host
// template of the configuration over one from the registry (a tag or
// metadata, which cannot take a route the configuration gives), the one of
// the earlier rule, then the one of the service whose name sorts first;
// the others are returned as conflicts. The result is deterministic.
func (rs *Routes) RouteConfiguration(name string, claims []Claim) (*routev3.RouteConfiguration, []Conflict, error) {
	mine := make([]Claim, 0, len(claims))
	for _, c := range claims {
		if c.Config == name && rs.valid(c.Rule) {
			mine = append(mine, c)
		}
	}
	slices.SortFunc(mine, rs.precedence)
	var won []Claim
	var conflicts []Conflict
	for i := 0; i < len(mine); {
		j := i + 1
		for j < len(mine) && rs.sameKey(mine[i], mine[j]) {
			j++
		}
		won = append(won, mine[i])
		var losers []Claim
		for _, c := range mine[i+1 : j] {
			if c.Service != mine[i].Service {
				losers = append(losers, c)
			}
		}
		if len(losers) > 0 {
			conflicts = append(conflicts, Conflict{Config: name, Host: mine[i].Host, Path: mine[i].Path, Winner: mine[i], Losers: losers})
		}
		i = j
	}
	rc := &routev3.RouteConfiguration{Name: name}
	byHost := map[string][]Claim{}
	for _, c := range won {
		byHost[c.Host] = append(byHost[c.Host], c)
	}
	hostless := byHost["*"]
	rs.sortRoutes(hostless)
	hosts := slices.Sorted(func(yield func(string) bool) {
		for h := range byHost {
			if h != "*" && !yield(h) {
				return
			}
		}
	})
	for _, h := range hosts {
		own := byHost[h]
		rs.sortRoutes(own)
		list := own
		if !slices.ContainsFunc(own, func(c Claim) bool { return c.Path == "/" && !rs.Rules[c.Rule].constrained }) {
			list = append(slices.Clip(own), hostless...)
		}
		rc.VirtualHosts = append(rc.VirtualHosts, rs.virtualHost(h, list))
	}
	if len(hostless) > 0 {
		rc.VirtualHosts = append(rc.VirtualHosts, rs.virtualHost("*", hostless))
	}
	if err := rc.ValidateAll(); err != nil {
		return nil, nil, fmt.Errorf("validating route configuration %q: %w", name, err)
	}
	return rc, conflicts, nil
}

// valid reports whether i is a rule of rs.
func (rs *Routes) valid(i int) bool { return rs != nil && i >= 0 && i < len(rs.Rules) }

// sameKey reports whether two claims are for the same route: host, path
// and extra match.
func (rs *Routes) sameKey(a, b Claim) bool {
	return a.Host == b.Host && a.Path == b.Path && rs.Rules[a.Rule].matchKey == rs.Rules[b.Rule].matchKey
}

// precedence orders claims by route key, then the claim served first (see
// RouteConfiguration).
func (rs *Routes) precedence(a, b Claim) int {
	return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Path, b.Path),
		cmp.Compare(rs.Rules[a.Rule].matchKey, rs.Rules[b.Rule].matchKey),
		compareBool(a.FromRegistry, b.FromRegistry), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Service, b.Service),
		cmp.Compare(a.Strip, b.Strip), cmp.Compare(a.Origin, b.Origin))
}

// sortRoutes puts one host's routes in the order Envoy must try them:
// longer paths first, and of one path the routes with extra match
// conditions before the one without.
func (rs *Routes) sortRoutes(cs []Claim) {
	slices.SortStableFunc(cs, func(a, b Claim) int {
		ra, rb := rs.Rules[a.Rule], rs.Rules[b.Rule]
		return cmp.Or(cmp.Compare(len(b.Path), len(a.Path)), cmp.Compare(a.Path, b.Path),
			compareBool(rb.constrained, ra.constrained), cmp.Compare(ra.matchKey, rb.matchKey))
	})
}

// virtualHost builds the virtual host of domain with the claims' routes in
// order.
func (rs *Routes) virtualHost(domain string, cs []Claim) *routev3.VirtualHost {
	vh := &routev3.VirtualHost{Name: domain, Domains: []string{domain}}
	if domain == "*" {
		vh.Name = "any"
	}
	for _, c := range cs {
		vh.Routes = append(vh.Routes, rs.Rules[c.Rule].route(c))
	}
	return vh
}

// route builds the route of one claim with the rule's options: a prefix
// match on the claim's path (and the fragment's extra conditions) to the
// service's cluster, the strip prefix removed by a regex rewrite, which
// overrides the fragment's rewrites.
func (r RouteRule) route(c Claim) *routev3.Route {
	var rt *routev3.Route
	if r.fragment != nil {
		rt = proto.Clone(r.fragment).(*routev3.Route)
	} else {
		rt = &routev3.Route{}
	}
	if rt.Match == nil {
		rt.Match = &routev3.RouteMatch{}
	}
	rt.Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: c.Path}
	ra := rt.GetRoute()
	if ra == nil {
		ra = &routev3.RouteAction{}
	}
	ra.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: c.Service}
	if c.Strip != "" {
		ra.PrefixRewrite = ""
		ra.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{
			Pattern:      &matcherv3.RegexMatcher{Regex: "^" + regexp.QuoteMeta(c.Strip) + "/?"},
			Substitution: "/",
		}
	}
	rt.Action = &routev3.Route_Route{Route: ra}
	return rt
}

// Configs returns the names of the route configurations the rules build,
// sorted, each once.
func (rs *Routes) Configs() []string {
	if rs == nil {
		return nil
	}
	var out []string
	for _, r := range rs.Rules {
		out = append(out, r.Config)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SelectRoute finds the route Envoy takes for a request to host and path
// in rc: the virtual host whose domain matches host best (exact, then the
// longest suffix wildcard "*.example.com", then the longest prefix
// wildcard "api.*", then "*"; a host with a port that matches nothing is
// tried without it), then the first of its routes whose prefix (or exact
// path) matches. It looks only at the path: a route with header or query
// conditions is taken as if they held. Both results are nil when no
// virtual host or no route matches.
func SelectRoute(rc *routev3.RouteConfiguration, host, path string) (*routev3.VirtualHost, *routev3.Route) {
	vh := selectVirtualHost(rc.GetVirtualHosts(), strings.ToLower(host))
	if vh == nil {
		if h, _, ok := strings.Cut(host, ":"); ok {
			vh = selectVirtualHost(rc.GetVirtualHosts(), strings.ToLower(h))
		}
	}
	if vh == nil {
		return nil, nil
	}
	for _, r := range vh.GetRoutes() {
		m := r.GetMatch()
		switch p := m.GetPathSpecifier().(type) {
		case *routev3.RouteMatch_Prefix:
			if strings.HasPrefix(path, p.Prefix) {
				return vh, r
			}
		case *routev3.RouteMatch_Path:
			if path == p.Path {
				return vh, r
			}
		}
	}
	return vh, nil
}

// selectVirtualHost is the virtual host of vhs whose domain matches host
// best, as Envoy ranks them.
func selectVirtualHost(vhs []*routev3.VirtualHost, host string) *routev3.VirtualHost {
	var best *routev3.VirtualHost
	bestRank, bestLen := 0, -1
	for _, vh := range vhs {
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			rank, n := 0, len(d)
			switch {
			case d == host:
				rank = 4
			case strings.HasPrefix(d, "*") && len(d) > 1 && strings.HasSuffix(host, d[1:]) && len(host) > len(d)-1:
				rank = 3
			case strings.HasSuffix(d, "*") && len(d) > 1 && strings.HasPrefix(host, d[:len(d)-1]) && len(host) > len(d)-1:
				rank = 2
			case d == "*":
				rank = 1
			}
			if rank > bestRank || rank == bestRank && rank > 0 && n > bestLen {
				best, bestRank, bestLen = vh, rank, n
			}
		}
	}
	return best
}
