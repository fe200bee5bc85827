package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/golden"
)

// tagged is a service whose endpoints carry tags.
func tagged(name string, tags ...string) sources.Service {
	return sources.Service{Name: name, Source: "consul", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 80, Metadata: map[string]string{sources.MetaTags: strings.Join(tags, ",")}},
	}}
}

func mustRouteRule(t *testing.T, r RouteRule, fragment map[string]any) RouteRule {
	t.Helper()
	built, err := NewRouteRule(r, fragment)
	if err != nil {
		t.Fatalf("NewRouteRule: %v", err)
	}
	return built
}

// allClaims collects the claims and drops of services by rs.
func allClaims(rs *Routes, svcs ...sources.Service) ([]Claim, []DroppedClaim) {
	var claims []Claim
	var dropped []DroppedClaim
	for _, s := range svcs {
		c, d := rs.Claims(s)
		claims, dropped = append(claims, c...), append(dropped, d...)
	}
	return claims, dropped
}

func TestRoutesGolden(t *testing.T) {
	rs := &Routes{Rules: []RouteRule{
		mustRouteRule(t, RouteRule{Config: "edge", Hosts: []string{"{service}.service.consul", "{service}.example.com"},
			Match: sources.Selector{Services: []string{"web", "api"}}}, map[string]any{
			"route": map[string]any{"timeout": "5s", "retry_policy": map[string]any{"retry_on": "5xx", "num_retries": 2}},
		}),
		mustRouteRule(t, RouteRule{Config: "edge", TagPrefix: DefaultTagPrefix}, nil),
		mustRouteRule(t, RouteRule{Config: "edge", TagPrefix: "canary-"}, map[string]any{
			"match": map[string]any{"headers": []any{map[string]any{"name": "x-canary", "present_match": true}}},
		}),
		mustRouteRule(t, RouteRule{Config: "internal", MetadataKey: "route"}, nil),
	}}
	svcs := []sources.Service{
		tagged("web"),
		tagged("api", "urlprefix-/api strip=/api", "urlprefix-api.example.com/v1"),
		tagged("billing", "urlprefix-/billing", "urlprefix-shop.example.com/pay strip=/pay", "urlprefix-:3306 proto=tcp"),
		// web's host from its template cannot be taken by a tag.
		tagged("intruder", "urlprefix-web.example.com/"),
		// Two services claim one host-less path: the first by name wins.
		tagged("zeta", "urlprefix-/shared"),
		tagged("alpha", "urlprefix-/shared", "urlprefix-bad host/x", "urlprefix-/ok redirect=/x"),
		tagged("web-canary", "canary-web.example.com/"),
		{Name: "metrics", Endpoints: []sources.Endpoint{{Address: "10.0.0.9", Port: 9090,
			Metadata: map[string]string{"route": "metrics.internal/, /metrics"}}}},
	}
	claims, dropped := allClaims(rs, svcs...)
	var out bytes.Buffer
	for _, name := range rs.Configs() {
		rc, conflicts, err := rs.RouteConfiguration(name, claims)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out.Write(protoJSON(t, rc))
		out.WriteByte('\n')
		for _, c := range conflicts {
			var losers []string
			for _, l := range c.Losers {
				losers = append(losers, l.Service+" ("+l.Origin+")")
			}
			fmt.Fprintf(&out, "conflict %s %s%s: %s (%s) over %v\n", c.Config, c.Host, c.Path, c.Winner.Service, c.Winner.Origin, losers)
		}
	}
	for _, d := range dropped {
		fmt.Fprintf(&out, "dropped %s %s: %s\n", d.Service, d.Origin, d.Reason)
	}
	golden.Check(t, filepath.Join("testdata", "routes.golden"), indentLines(t, out.Bytes()))
}

// indentLines re-indents each JSON line of b (other lines stay).
func indentLines(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	for line := range bytes.Lines(b) {
		if !bytes.HasPrefix(line, []byte("{")) {
			out.Write(line)
			continue
		}
		if err := json.Indent(&out, bytes.TrimSpace(line), "", "  "); err != nil {
			t.Fatal(err)
		}
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// TestRoutesDeterministic checks that the order services arrive in does
// not change a route configuration.
func TestRoutesDeterministic(t *testing.T) {
	rs := &Routes{Rules: []RouteRule{mustRouteRule(t, RouteRule{Config: "edge", TagPrefix: DefaultTagPrefix, Hosts: []string{"{service}.example.com"}}, nil)}}
	var svcs []sources.Service
	for i := range 30 {
		svcs = append(svcs, tagged(fmt.Sprintf("svc%02d", i), fmt.Sprintf("urlprefix-/p%d", i%7), "urlprefix-/"))
	}
	first, _ := allClaims(rs, svcs...)
	want, wantConflicts, err := rs.RouteConfiguration("edge", first)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		slices.Reverse(svcs)
		claims, _ := allClaims(rs, svcs...)
		slices.Reverse(claims)
		got, conflicts, err := rs.RouteConfiguration("edge", claims)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) || len(conflicts) != len(wantConflicts) {
			t.Fatalf("route configuration depends on the order of services")
		}
	}
	if len(wantConflicts) != 8 { // "/" by 30 services, "/p0".."/p6" by several each
		t.Errorf("conflicts = %d, want 8", len(wantConflicts))
	}
}

// TestRoutesEmpty checks that a configuration nothing claims is still
// built, empty, so that the listeners naming it finish warming.
func TestRoutesEmpty(t *testing.T) {
	rs := &Routes{Rules: []RouteRule{mustRouteRule(t, RouteRule{Config: "edge", TagPrefix: DefaultTagPrefix}, nil)}}
	rc, conflicts, err := rs.RouteConfiguration("edge", nil)
	if err != nil || rc.GetName() != "edge" || len(rc.GetVirtualHosts()) != 0 || len(conflicts) != 0 {
		t.Fatalf("empty configuration = %v, %v, %v", rc, conflicts, err)
	}
}

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		spec, host, path, strip, err string
	}{
		{spec: "/api", host: "*", path: "/api"},
		{spec: "/", host: "*", path: "/"},
		{spec: "API.Example.com/v1", host: "api.example.com", path: "/v1"},
		{spec: "*.example.com:8443/v1 strip=/v1", host: "*.example.com:8443", path: "/v1", strip: "/v1"},
		{spec: "/api  strip=/api", host: "*", path: "/api", strip: "/api"},
		{spec: "", err: "empty route"},
		{spec: ":3306 proto=tcp", err: "has no path"},
		{spec: "api.example.com", err: "has no path"},
		{spec: "/api strip=/v1", err: "not a prefix"},
		{spec: "/api redirect=/x", err: `option "redirect" is not served`},
		{spec: "bad_host/x", err: "is not a DNS name"},
		{spec: "/a b", err: `option "b" is not served`},
		{spec: "/x?y", err: "URL path characters"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			host, path, strip, err := parseSpec(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || host != tc.host || path != tc.path || strip != tc.strip {
				t.Fatalf("= %q %q %q %v, want %q %q %q", host, path, strip, err, tc.host, tc.path, tc.strip)
			}
		})
	}
}

func TestNewRouteRuleErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rule     RouteRule
		fragment map[string]any
		key, err string
	}{
		{"no config", RouteRule{TagPrefix: "x"}, nil, "config", "is required"},
		{"routes nothing", RouteRule{Config: "c"}, nil, "hosts", "routes nothing"},
		{"bad host template", RouteRule{Config: "c", Hosts: []string{"{service}_x"}}, nil, "hosts[0]", "not a DNS name"},
		{"paths without hosts", RouteRule{Config: "c", TagPrefix: "x", Paths: []string{"/a"}}, nil, "paths", "no"},
		{"bad path", RouteRule{Config: "c", Hosts: []string{"a"}, Paths: []string{"a"}}, nil, "paths[0]", "must start with /"},
		{"bad selector", RouteRule{Config: "c", TagPrefix: "x", Match: sources.Selector{Services: []string{"["}}}, nil, "match.services[0]", "bad glob"},
		{"sets the path", RouteRule{Config: "c", TagPrefix: "x"}, map[string]any{"match": map[string]any{"prefix": "/x"}}, "route.match", "sets the path"},
		{"sets the cluster", RouteRule{Config: "c", TagPrefix: "x"}, map[string]any{"route": map[string]any{"cluster": "x"}}, "route.route", "sets the cluster"},
		{"redirect", RouteRule{Config: "c", TagPrefix: "x"}, map[string]any{"redirect": map[string]any{"path_redirect": "/"}}, "route.redirect", "set by the bridge"},
		{"unknown field", RouteRule{Config: "c", TagPrefix: "x"}, map[string]any{"route": map[string]any{"timeot": "1s"}}, "route.route.timeot", "unknown field"},
		{"bad duration", RouteRule{Config: "c", TagPrefix: "x"}, map[string]any{"route": map[string]any{"timeout": "fast"}}, "route.route.timeout", ""},
		{"invalid", RouteRule{Config: "c", TagPrefix: "x"}, map[string]any{"route": map[string]any{"retry_policy": map[string]any{"num_retries": -1}}}, "route.route.retry_policy.num_retries", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRouteRule(tc.rule, tc.fragment)
			var ke *settings.KeyError
			if err == nil || !asKeyError(err, &ke) || ke.Key != tc.key || !strings.Contains(ke.Err.Error(), tc.err) {
				t.Fatalf("err = %v, want key %s and %q", err, tc.key, tc.err)
			}
		})
	}
}

// TestRouteFallback checks Fabio's order: a request no route of its host
// takes goes to the routes without a host, unless the host routes "/".
func TestRouteFallback(t *testing.T) {
	rs := &Routes{Rules: []RouteRule{mustRouteRule(t, RouteRule{Config: "edge", TagPrefix: DefaultTagPrefix}, nil)}}
	claims, _ := allClaims(rs, tagged("v1", "urlprefix-api.example.com/v1"), tagged("rest", "urlprefix-/"),
		tagged("site", "urlprefix-www.example.com/"))
	rc, _, err := rs.RouteConfiguration("edge", claims)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			got[vh.GetDomains()[0]] = append(got[vh.GetDomains()[0]], r.GetMatch().GetPrefix()+">"+r.GetRoute().GetCluster())
		}
	}
	want := map[string][]string{
		"api.example.com": {"/v1>v1", "/>rest"},
		"www.example.com": {"/>site"},
		"*":               {"/>rest"},
	}
	for h, w := range want {
		if !slices.Equal(got[h], w) {
			t.Errorf("%s: %v, want %v", h, got[h], w)
		}
	}
}

func asKeyError(err error, ke **settings.KeyError) bool { return errors.As(err, ke) }
