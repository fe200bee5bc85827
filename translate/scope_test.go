package translate

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsbridge/xdsbridge/sources"
)

func testScopes(t *testing.T, def *Scope) *Scopes {
	t.Helper()
	s, err := NewScopes([]Scope{
		{Name: "payments", Node: NodeMatch{ID: "pay-*"}, Services: []sources.Selector{{Services: []string{"pay*"}}, {Tags: []string{"shared"}}},
			Deny: []sources.Selector{{Services: []string{"payroll"}}}},
		{Name: "eu", Node: NodeMatch{Locality: sources.Locality{Region: "eu"}, Metadata: map[string]string{"tier": "edge"}},
			Services: []sources.Selector{{Sources: []string{"consul"}}}},
		// Never reached for pay-* nodes: the first matching rule wins.
		{Name: "everyone-else", Node: NodeMatch{Cluster: "c*"}, Deny: []sources.Selector{{Services: []string{"secret*"}}}},
	}, def)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScopeMatch(t *testing.T) {
	md, _ := structpb.NewStruct(map[string]any{"tier": "edge", "n": 1.0})
	cases := map[string]struct {
		node *corev3.Node
		def  *Scope
		want string // scope name; "" unscoped
		rule int
	}{
		"id glob":                  {node: &corev3.Node{Id: "pay-1", Cluster: "x"}, want: "payments", rule: 0},
		"first match wins":         {node: &corev3.Node{Id: "pay-1", Cluster: "x", Locality: &corev3.Locality{Region: "eu"}, Metadata: md}, want: "payments", rule: 0},
		"locality and metadata":    {node: &corev3.Node{Id: "a", Locality: &corev3.Locality{Region: "eu"}, Metadata: md}, want: "eu", rule: 1},
		"metadata missing":         {node: &corev3.Node{Id: "a", Cluster: "c", Locality: &corev3.Locality{Region: "eu"}}, want: "everyone-else", rule: 2},
		"no rule, default all":     {node: &corev3.Node{Id: "a"}, want: "", rule: -1},
		"no rule, default none":    {node: &corev3.Node{Id: "a"}, def: &Scope{Name: DefaultScopeName, Services: []sources.Selector{}}, want: DefaultScopeName, rule: -1},
		"glob on an empty cluster": {node: &corev3.Node{Id: "b", Cluster: ""}, want: "", rule: -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := testScopes(t, tc.def)
			sc, rule := s.Match(tc.node)
			got := ""
			if sc != nil {
				got = sc.Name
			}
			if got != tc.want || rule != tc.rule {
				t.Fatalf("scope %q by rule %d, want %q by rule %d", got, rule, tc.want, tc.rule)
			}
			if id, n := s.Of(tc.node); n != got || (got == "") != (id == 0) {
				t.Fatalf("Of = %d %q for scope %q", id, n, got)
			}
		})
	}
}

func TestScopeMembership(t *testing.T) {
	s := testScopes(t, &Scope{Name: DefaultScopeName, Services: []sources.Selector{}})
	shared := sources.Endpoint{Address: "10.0.0.1", Port: 80, Metadata: map[string]string{sources.MetaTags: "shared"}}
	cases := map[string]struct {
		svc        sources.Service
		in, denied uint64
	}{
		"by name":            {svc: sources.Service{Name: "payments", Source: "file"}, in: 1<<0 | 1<<2},
		"denied wins":        {svc: sources.Service{Name: "payroll", Source: "consul"}, in: 1<<1 | 1<<2, denied: 1 << 0},
		"by endpoint tag":    {svc: sources.Service{Name: "auth", Source: "file", Endpoints: []sources.Endpoint{shared}}, in: 1<<0 | 1<<2},
		"by source":          {svc: sources.Service{Name: "web", Source: "consul"}, in: 1<<1 | 1<<2},
		"denied to all else": {svc: sources.Service{Name: "secrets", Source: "file"}, denied: 1 << 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in, denied := s.Membership(tc.svc)
			if in != tc.in || denied != tc.denied {
				t.Fatalf("in %b denied %b, want %b and %b (the default, id 4, delivers nothing)", in, denied, tc.in, tc.denied)
			}
		})
	}
	if in, denied := (*Scopes)(nil).Membership(sources.Service{Name: "x"}); in != 0 || denied != 0 {
		t.Fatal("no scopes put a service in a scope")
	}
}

func TestScopesEvery(t *testing.T) {
	if got := testScopes(t, &Scope{Name: DefaultScopeName, Services: []sources.Selector{}}).Every(); got != 0b1111 {
		t.Errorf("three rules and a default: %b, want 1111", got)
	}
	if got := testScopes(t, nil).Every(); got != 0b111 {
		t.Errorf("three rules, no default: %b, want 111", got)
	}
	if got := (*Scopes)(nil).Every(); got != 0 {
		t.Errorf("no scopes: %b, want 0", got)
	}
}

func TestNewScopesErrors(t *testing.T) {
	many := make([]Scope, MaxScopes)
	for i := range many {
		many[i].Name = "s" + strings.Repeat("x", i)
	}
	cases := map[string]struct {
		rules []Scope
		def   *Scope
		want  string
	}{
		"no name":       {rules: []Scope{{}}, want: "rules[0].name: is required"},
		"duplicate":     {rules: []Scope{{Name: "a"}, {Name: "a"}}, want: `rules[1].name: "a" is also the name of rules[0]`},
		"bad id glob":   {rules: []Scope{{Name: "a", Node: NodeMatch{ID: "["}}}, want: "rules[0].node.id: bad glob"},
		"bad selector":  {rules: []Scope{{Name: "a", Deny: []sources.Selector{{Services: []string{"["}}}}}, want: "rules[0].deny[0].services[0]: bad glob"},
		"too many":      {rules: many, def: &Scope{Name: DefaultScopeName}, want: "65 scopes, at most 64"},
		"default named": {rules: []Scope{{Name: DefaultScopeName}}, def: &Scope{Name: DefaultScopeName}, want: "names the default scope"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewScopes(tc.rules, tc.def)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
