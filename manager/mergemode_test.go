package manager

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// describe renders a merged service compactly: each endpoint as
// address/sub_zone/priority/weight, then the locality weights.
func describe(s sources.Service) string {
	var b strings.Builder
	b.WriteString(s.Name + "[")
	for i, e := range s.Endpoints {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s/%s/p%d/w%d", e.Address, e.Locality.SubZone, e.Priority, e.Weight)
	}
	b.WriteString("]")
	if s.Localities != nil {
		b.WriteString(" loc{")
		for i, l := range s.Localities {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "p%d/%s=%d", l.Priority, l.Locality.SubZone, l.Weight)
		}
		b.WriteString("}")
	}
	return b.String()
}

func ep(addr string, prio, weight uint32, subZone string) sources.Endpoint {
	return sources.Endpoint{Address: addr, Port: 80, Priority: prio, Weight: weight, Health: sources.HealthHealthy,
		Locality: sources.Locality{SubZone: subZone}}
}

func svc(name string, eps ...sources.Endpoint) sources.Service {
	return sources.Service{Name: name, Endpoints: append([]sources.Endpoint{}, eps...)}
}

func weightedRule(service string, ws ...any) MergeRule {
	r := MergeRule{Service: service, Mode: MergeWeighted}
	for i := 0; i+1 < len(ws); i += 2 {
		r.Weights = append(r.Weights, SourceWeight{Source: ws[i].(string), Weight: new(int64(ws[i+1].(int)))})
	}
	return r
}

// TestMergeModes applies one Full update per source (a, b, c in precedence
// order) and checks the merged service and what each source has shadowed.
func TestMergeModes(t *testing.T) {
	tests := []struct {
		name     string
		merge    MergeConfig
		state    [3][]sources.Service
		want     string   // describe of the merged "web", "" when absent
		shadowed []string // per source, comma-separated shadowed services
	}{
		{
			name:     "first: higher precedence wins and shadows",
			state:    [3][]sources.Service{{svc("web", ep("10.0.0.1", 0, 1, ""))}, {svc("web", ep("10.0.0.2", 0, 1, ""))}},
			want:     "web[10.0.0.1//p0/w1]",
			shadowed: []string{"", "web", ""},
		},
		{
			name:     "first: an empty version does not shadow",
			state:    [3][]sources.Service{{svc("web")}, {svc("web", ep("10.0.0.2", 0, 1, ""))}, {svc("web", ep("10.0.0.3", 0, 1, ""))}},
			want:     "web[10.0.0.2//p0/w1]",
			shadowed: []string{"", "", "web"},
		},
		{
			name:     "first: every version empty is served empty",
			state:    [3][]sources.Service{{svc("web")}, {svc("web")}},
			want:     "web[]",
			shadowed: []string{"", "", ""},
		},
		{
			name:  "union: every source, a repeated address once from the higher source",
			merge: MergeConfig{Default: MergeUnion},
			state: [3][]sources.Service{
				{svc("web", ep("10.0.0.1", 0, 1, ""), ep("10.0.0.2", 0, 5, ""))},
				{svc("web", ep("10.0.0.2", 0, 9, ""), ep("10.0.0.3", 1, 1, ""))},
			},
			want:     "web[10.0.0.1//p0/w1 10.0.0.2//p0/w5 10.0.0.3//p1/w1]",
			shadowed: []string{"", "", ""},
		},
		{
			name:  "union rule overrides a first default",
			merge: MergeConfig{Services: []MergeRule{{Service: "web", Mode: MergeUnion}}},
			state: [3][]sources.Service{
				{svc("web", ep("10.0.0.1", 0, 1, "")), svc("api", ep("10.0.1.1", 0, 1, ""))},
				{svc("web", ep("10.0.0.2", 0, 1, "")), svc("api", ep("10.0.1.2", 0, 1, ""))},
			},
			want:     "web[10.0.0.1//p0/w1 10.0.0.2//p0/w1]",
			shadowed: []string{"", "api", ""},
		},
		{
			name:  "weighted: one locality per source, weights scaled",
			merge: MergeConfig{Services: []MergeRule{weightedRule("web", "a", 90, "b", 10)}},
			state: [3][]sources.Service{
				{svc("web", ep("10.0.0.1", 0, 1, ""), ep("10.0.0.2", 0, 1, ""))},
				{svc("web", ep("10.0.0.3", 0, 1, ""))},
			},
			want:     "web[10.0.0.1/a/p0/w1 10.0.0.2/a/p0/w1 10.0.0.3/b/p0/w1] loc{p0/a=90000 p0/b=10000}",
			shadowed: []string{"", "", ""},
		},
		{
			name:  "weighted: a source's localities split its share by endpoint weight",
			merge: MergeConfig{Services: []MergeRule{weightedRule("web", "a", 50, "b", 50)}},
			state: [3][]sources.Service{
				{svc("web", ep("10.0.0.1", 0, 1, "r1"), ep("10.0.0.2", 0, 3, "r2"))},
				{svc("web", ep("10.0.0.3", 0, 1, ""))},
			},
			want:     "web[10.0.0.1/a/r1/p0/w1 10.0.0.2/a/r2/p0/w3 10.0.0.3/b/p0/w1] loc{p0/a/r1=12500 p0/a/r2=37500 p0/b=50000}",
			shadowed: []string{"", "", ""},
		},
		{
			name:  "weighted: priorities kept, each weighted on its own",
			merge: MergeConfig{Services: []MergeRule{weightedRule("web", "a", 90, "b", 10)}},
			state: [3][]sources.Service{
				{svc("web", ep("10.0.0.1", 0, 1, ""), ep("10.0.0.2", 1, 1, ""))},
				{svc("web", ep("10.0.0.3", 0, 1, ""))},
			},
			want:     "web[10.0.0.1/a/p0/w1 10.0.0.3/b/p0/w1 10.0.0.2/a/p1/w1] loc{p0/a=90000 p0/b=10000 p1/a=90000}",
			shadowed: []string{"", "", ""},
		},
		{
			name:  "weighted: weight 0 drains, an unlisted source is shadowed, a repeat is served once",
			merge: MergeConfig{Services: []MergeRule{weightedRule("web", "a", 0, "b", 10)}},
			state: [3][]sources.Service{
				{svc("web", ep("10.0.0.1", 0, 1, ""))},
				{svc("web", ep("10.0.0.2", 0, 1, ""), ep("10.0.0.2", 0, 1, ""))},
				{svc("web", ep("10.0.0.3", 0, 1, ""))},
			},
			want:     "web[10.0.0.2/b/p0/w1] loc{p0/b=10000}",
			shadowed: []string{"web", "", "web"},
		},
		{
			name:     "weighted: a service only an unlisted source reports is served empty",
			merge:    MergeConfig{Services: []MergeRule{weightedRule("web", "a", 90, "b", 10)}},
			state:    [3][]sources.Service{nil, nil, {svc("web", ep("10.0.0.3", 0, 1, ""))}},
			want:     "web[] loc{}",
			shadowed: []string{"", "", "web"},
		},
		{
			name:     "absent everywhere",
			state:    [3][]sources.Service{{svc("api")}},
			want:     "",
			shadowed: []string{"", "", ""},
		},
	}
	names := []string{"a", "b", "c"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.merge.Validate(names); err != nil {
				t.Fatalf("invalid test merge configuration: %v", err)
			}
			m := testMerger(names...)
			m.setModes(tt.merge)
			for i, ss := range tt.state {
				m.apply(i, fullUp(ss...))
			}
			c := m.flush()
			got := ""
			for _, s := range c.Upserted {
				if s.Name == "web" {
					got = describe(s)
				}
			}
			if got != tt.want {
				t.Errorf("merged web =\n  %s\nwant\n  %s", got, tt.want)
			}
			for i, v := range m.views {
				snap := Named{view: v}.snapshot()
				if got := strings.Join(snap.ShadowedServices, ","); got != tt.shadowed[i] || snap.Shadowed != len(snap.ShadowedServices) {
					t.Errorf("source %s shadowed %d %q, want %q", names[i], snap.Shadowed, got, tt.shadowed[i])
				}
			}
		})
	}
}

// TestMergeTransitions follows one service through changes that move the
// served version and the shadowing between sources.
func TestMergeTransitions(t *testing.T) {
	names := []string{"a", "b"}
	m := testMerger(names...)
	views := m.views
	web1, web2 := svc("web", ep("10.0.0.1", 0, 1, "")), svc("web", ep("10.0.0.2", 0, 1, ""))
	steps := []struct {
		name     string
		act      func()
		want     string
		shadowed [2]int
	}{
		{"both report, a wins", func() { m.apply(0, fullUp(web1)); m.apply(1, fullUp(web2)) }, "+web[10.0.0.1:80]", [2]int{0, 1}},
		{"a empties web: b takes over", func() { m.apply(0, upsertUp(svc("web"))) }, "+web[10.0.0.2:80]", [2]int{0, 0}},
		{"a has endpoints again", func() { m.apply(0, upsertUp(web1)) }, "+web[10.0.0.1:80]", [2]int{0, 1}},
		{"a shadowed change of b publishes nothing", func() {
			m.apply(1, upsertUp(svc("web", ep("10.0.0.3", 0, 1, ""))))
		}, "", [2]int{0, 1}},
		{"a removes web", func() { m.apply(0, removeUp("web")) }, "+web[10.0.0.3:80]", [2]int{0, 0}},
		{"switch to weighted b only", func() {
			m.setModes(MergeConfig{Services: []MergeRule{weightedRule("web", "a", 1, "b", 1)}})
			m.apply(0, upsertUp(web1))
		}, "+web[10.0.0.1:80 10.0.0.3:80]", [2]int{0, 0}},
		{"back to first", func() { m.setModes(MergeConfig{}) }, "+web[10.0.0.1:80]", [2]int{0, 1}},
		{"an unchanged configuration changes nothing", func() { m.setModes(MergeConfig{}) }, "", [2]int{0, 1}},
	}
	for _, s := range steps {
		s.act()
		if got := changesString(m.flush()); got != s.want {
			t.Errorf("%s: flush = %q, want %q", s.name, got, s.want)
		}
		for i := range views {
			if got := (Named{view: views[i]}).snapshot().Shadowed; got != s.shadowed[i] {
				t.Errorf("%s: source %s shadows %d services, want %d", s.name, names[i], got, s.shadowed[i])
			}
		}
	}
}

func TestMergeConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mc   MergeConfig
		want string // error text, "" for valid
	}{
		{"zero value", MergeConfig{}, ""},
		{"union default", MergeConfig{Default: "union"}, ""},
		{"weighted rule", MergeConfig{Services: []MergeRule{weightedRule("web", "a", 90, "b", 10)}}, ""},
		{"unknown default", MergeConfig{Default: "last"}, `default: unknown mode "last" (want first or union)`},
		{"weighted default", MergeConfig{Default: "weighted"}, "default: mode weighted needs weights; give it per service under services"},
		{"no service", MergeConfig{Services: []MergeRule{{Mode: "union"}}}, "services[0].service: is required"},
		{"duplicate service", MergeConfig{Services: []MergeRule{{Service: "web", Mode: "union"}, {Service: "web", Mode: "first"}}},
			`services[1].service: duplicate service "web" (also services[0])`},
		{"no mode", MergeConfig{Services: []MergeRule{{Service: "web"}}}, "services[0].mode: is required (first, union or weighted)"},
		{"unknown mode", MergeConfig{Services: []MergeRule{{Service: "web", Mode: "split"}}},
			`services[0].mode: unknown mode "split" (want first, union or weighted)`},
		{"weights on union", MergeConfig{Services: []MergeRule{{Service: "web", Mode: "union", Weights: weightedRule("", "a", 1).Weights}}},
			"services[0].weights: only mode weighted takes weights (mode is union)"},
		{"weighted without weights", MergeConfig{Services: []MergeRule{{Service: "web", Mode: "weighted"}}},
			"services[0].weights: mode weighted needs at least one source weight"},
		{"unknown source", MergeConfig{Services: []MergeRule{weightedRule("web", "a", 1, "consull", 1)}},
			`services[0].weights[1].source: unknown source "consull" (configured: a, b, c)`},
		{"no source", MergeConfig{Services: []MergeRule{weightedRule("web", "", 1)}}, "services[0].weights[0].source: is required"},
		{"duplicate source", MergeConfig{Services: []MergeRule{weightedRule("web", "a", 1, "a", 2)}},
			`services[0].weights[1].source: duplicate source "a" (also weights[0])`},
		{"missing weight", MergeConfig{Services: []MergeRule{{Service: "web", Mode: "weighted", Weights: []SourceWeight{{Source: "a"}}}}},
			"services[0].weights[0].weight: is required"},
		{"negative weight", MergeConfig{Services: []MergeRule{weightedRule("web", "a", -1)}}, "services[0].weights[0].weight: -1 is outside 0..10000"},
		{"huge weight", MergeConfig{Services: []MergeRule{weightedRule("web", "a", 10001)}}, "services[0].weights[0].weight: 10001 is outside 0..10000"},
		{"all zero", MergeConfig{Services: []MergeRule{weightedRule("web", "a", 0, "b", 0)}}, "services[0].weights: at least one weight must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.mc.Validate([]string{"a", "b", "c"})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestShadowedNamesBounded checks that a status lists the first names of a
// large shadowed set, in order, and counts all of them.
func TestShadowedNamesBounded(t *testing.T) {
	s := &statusView{}
	for i := 999; i >= 0; i-- {
		s.setShadowed(fmt.Sprintf("svc-%03d", i), true)
	}
	s.setShadowed("svc-000", false)
	snap := Named{view: s}.snapshot()
	want := make([]string, maxShadowedNames)
	for i := range want {
		want[i] = fmt.Sprintf("svc-%03d", i+1)
	}
	if snap.Shadowed != 999 || !slices.Equal(snap.ShadowedServices, want) {
		t.Errorf("shadowed %d %v, want 999 %v", snap.Shadowed, snap.ShadowedServices, want)
	}
}

// TestManagerSetMerge changes the merge configuration of a running manager:
// an invalid one is refused with its key, a valid one republishes the
// services it changes.
func TestManagerSetMerge(t *testing.T) {
	m, fakes, rec := startManager(t, Options{Holdoff: time.Millisecond}, "a", "b")
	fakes[0].send(t, fullUp(testSvc("web", "10.0.0.1")))
	fakes[1].send(t, fullUp(testSvc("web", "10.0.0.2")))
	if got := changesString(rec.wait(t, 0)); got != "+web[10.0.0.1:80]" {
		t.Fatalf("first publish %q", got)
	}
	ctx := t.Context()
	err := m.SetMerge(ctx, MergeConfig{Default: "newest"})
	if err == nil || !strings.Contains(err.Error(), `merge.default: unknown mode "newest"`) {
		t.Errorf("SetMerge(invalid) = %v", err)
	}
	if err := m.SetMerge(ctx, MergeConfig{Default: MergeUnion}); err != nil {
		t.Fatal(err)
	}
	if got := changesString(rec.wait(t, 1)); got != "+web[10.0.0.1:80 10.0.0.2:80]" {
		t.Errorf("publish after SetMerge(union) %q", got)
	}
}

// TestMergeFollowsReconfigure reorders and removes sources of a running
// manager: the weights of a weighted rule stay with the sources they name,
// and the shadowing follows the new precedence.
func TestMergeFollowsReconfigure(t *testing.T) {
	mc := MergeConfig{Services: []MergeRule{weightedRule("web", "a", 3, "b", 1)}}
	m, fakes, rec := startManager(t, Options{Holdoff: time.Millisecond, Merge: mc}, "a", "b")
	fakes[0].send(t, fullUp(testSvc("web", "10.0.0.1"), testSvc("api", "10.0.1.1")))
	fakes[1].send(t, fullUp(testSvc("web", "10.0.0.2"), testSvc("api", "10.0.1.2")))
	webOf := func(c Changes) string {
		for _, s := range c.Upserted {
			if s.Name == "web" {
				return describe(s)
			}
		}
		return ""
	}
	const weighted = "web[10.0.0.1/a/p0/w0 10.0.0.2/b/p0/w0] loc{p0/a=3000 p0/b=1000}"
	if got := webOf(rec.wait(t, 0)); got != weighted {
		t.Fatalf("first publish web = %s", got)
	}
	ctx := t.Context()
	if err := m.Reconfigure(ctx, []Named{{Name: "b"}, {Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	// web is unchanged; api now comes from b, which shadows a's.
	if got := changesString(rec.wait(t, 1)); got != "+api[10.0.1.2:80]" {
		t.Errorf("publish after the reorder %q", got)
	}
	snap := m.Statuses()[1] // a, now second
	if snap.Shadowed != 1 || snap.ShadowedServices[0] != "api" {
		t.Errorf("a shadows %d %v, want api", snap.Shadowed, snap.ShadowedServices)
	}
	if err := m.Reconfigure(ctx, []Named{{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	if got := webOf(rec.wait(t, 2)); got != "web[10.0.0.1/a/p0/w0] loc{p0/a=3000}" {
		t.Errorf("web after removing b = %s", got)
	}
}

// TestManagerSetMergeUnchanged checks that setting the merge configuration
// in force again (every reload does) is no change: nothing is logged.
func TestManagerSetMergeUnchanged(t *testing.T) {
	var logs testLog
	mc := MergeConfig{Default: MergeFirst, Services: []MergeRule{{Service: "web", Mode: MergeUnion}}}
	m, fakes, rec := startManager(t, Options{Holdoff: time.Millisecond, Merge: mc, Logger: logs.logger()}, "a")
	fakes[0].send(t, fullUp(testSvc("web", "10.0.0.1")))
	rec.wait(t, 0)
	same := MergeConfig{Default: MergeFirst, Services: []MergeRule{{Service: "web", Mode: MergeUnion}}}
	if err := m.SetMerge(t.Context(), same); err != nil {
		t.Fatal(err)
	}
	if err := m.SetMerge(t.Context(), MergeConfig{Default: MergeUnion}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the change logged", func() bool { return strings.Contains(logs.buf.String(), "merge modes changed") })
	if n := strings.Count(logs.buf.String(), "merge modes changed"); n != 1 {
		t.Errorf("%d lines say the merge modes changed, want 1 (the real change):\n%s", n, logs.buf.String())
	}
}
