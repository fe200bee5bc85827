package builtin

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
)

// chain builds a chain from the YAML of a transforms list.
func chain(t *testing.T, text string) (*transform.Chain, error) {
	t.Helper()
	var raw []map[string]any
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatal(err)
	}
	var entries []transform.Entry
	for i, m := range raw {
		e := transform.Entry{Index: i, Settings: map[string]any{}}
		for k, v := range m {
			switch k {
			case "name":
				e.Name = v.(string)
			case "type":
				e.Type = v.(string)
			default:
				e.Settings[k] = v
			}
		}
		entries = append(entries, e)
	}
	return transform.NewChain(entries)
}

func ep(addr string, md ...string) sources.Endpoint {
	e := sources.Endpoint{Address: addr, Port: 80}
	if len(md) > 0 {
		e.Metadata = map[string]string{}
		for i := 0; i+1 < len(md); i += 2 {
			e.Metadata[md[i]] = md[i+1]
		}
	}
	return e
}

// show prints a service compactly: name, then per endpoint the address,
// weight/priority, locality, metadata and the transforms that touched it.
func show(svc sources.Service, ok bool) string {
	if !ok {
		return "dropped"
	}
	svc = svc.Clone()
	svc.Sort() // in the order translation emits them
	var b strings.Builder
	b.WriteString(svc.Name)
	for _, e := range svc.Endpoints {
		fmt.Fprintf(&b, " %s", e.Address)
		if e.Weight != 0 || e.Priority != 0 {
			fmt.Fprintf(&b, "/w%d/p%d", e.Weight, e.Priority)
		}
		if e.Locality != (sources.Locality{}) {
			fmt.Fprintf(&b, "@%s/%s/%s", e.Locality.Region, e.Locality.Zone, e.Locality.SubZone)
		}
		var md []string
		for k, v := range e.Metadata {
			md = append(md, k+"="+v)
		}
		slices.Sort(md)
		if len(md) > 0 {
			fmt.Fprintf(&b, "{%s}", strings.Join(md, ","))
		}
		if len(e.Origin.Transforms) > 0 {
			fmt.Fprintf(&b, "<%s>", strings.Join(e.Origin.Transforms, ","))
		}
	}
	return b.String()
}

func TestBuiltins(t *testing.T) {
	web := sources.Service{Name: "web", Source: "consul", Endpoints: []sources.Endpoint{
		ep("10.0.0.1", "tags", "canary,v2", "az", "eu-1a", "version", "v2"),
		ep("10.0.0.2", "tags", "v1", "version", "v1"),
	}}
	api := sources.Service{Name: "api", Source: "legacy-dns", Endpoints: []sources.Endpoint{ep("10.1.0.1")}}
	tests := []struct {
		name       string
		transforms string
		in         sources.Service
		want       string
	}{
		{"include by name keeps", "[{type: include, services: ['w*']}]", web, "web 10.0.0.1{az=eu-1a,tags=canary,v2,version=v2} 10.0.0.2{tags=v1,version=v1}"},
		{"include by name drops", "[{type: include, services: ['w*']}]", api, "dropped"},
		{"include by source", "[{type: include, sources: [consul]}]", api, "dropped"},
		{"include by tag keeps endpoints", "[{type: include, tags: [v1]}]", web, "web 10.0.0.2{tags=v1,version=v1}"},
		{"include by tag leaves an empty service", "[{type: include, tags: [v1]}]", api, "api"},
		{"exclude by name", "[{type: exclude, services: [api]}]", api, "dropped"},
		{"exclude by metadata", "[{type: exclude, metadata: {version: v2}}]", web, "web 10.0.0.2{tags=v1,version=v1}"},
		{"exclude by tag of other services", "[{type: exclude, services: [api], tags: [canary]}]", web, "web 10.0.0.1{az=eu-1a,tags=canary,v2,version=v2} 10.0.0.2{tags=v1,version=v1}"},
		{"rename by source", "[{type: rename, sources: [legacy-dns], template: '{{.Name}}-{{.Source}}'}]", api, "api-legacy-dns 10.1.0.1<rename>"},
		{"rename not matching", "[{type: rename, sources: [legacy-dns], template: 'x'}]", web, "web 10.0.0.1{az=eu-1a,tags=canary,v2,version=v2} 10.0.0.2{tags=v1,version=v1}"},
		{"metadata from tag", "[{name: subsets, type: metadata, set: [{tag: canary, key: stage}]}]", web,
			"web 10.0.0.1{az=eu-1a,stage=true,tags=canary,v2,version=v2}<subsets> 10.0.0.2{tags=v1,version=v1}"},
		{"metadata copy", "[{type: metadata, set: [{from: version, key: subset}]}]", web,
			"web 10.0.0.1{az=eu-1a,subset=v2,tags=canary,v2,version=v2}<metadata> 10.0.0.2{subset=v1,tags=v1,version=v1}<metadata>"},
		{"override weight of tagged", "[{type: override, tags: [canary], weight: 5, priority: 1}]", web,
			"web 10.0.0.2{tags=v1,version=v1} 10.0.0.1/w5/p1{az=eu-1a,tags=canary,v2,version=v2}<override>"},
		{"locality from metadata", "[{type: locality, region: eu, zone: '{{.Meta.az}}'}]", web,
			"web 10.0.0.2@eu//{tags=v1,version=v1}<locality> 10.0.0.1@eu/eu-1a/{az=eu-1a,tags=canary,v2,version=v2}<locality>"},
		{"chain in order", `
- {type: exclude, tags: [v1]}
- {type: override, weight: 3}
- {type: rename, template: 'new-{{.Name}}'}`, web,
			"new-web 10.0.0.1/w3/p0{az=eu-1a,tags=canary,v2,version=v2}<override,rename>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := chain(t, tt.transforms)
			if err != nil {
				t.Fatal(err)
			}
			before := show(tt.in, true)
			if got := show(c.Service(tt.in)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if after := show(tt.in, true); after != before {
				t.Errorf("the input was modified: %s, was %s", after, before)
			}
		})
	}
}

func TestBuiltinErrors(t *testing.T) {
	tests := []struct{ transforms, want string }{
		{"[{services: [a]}]", "transforms[0].type: is required"},
		{"[{type: nope}]", `transforms[0].type: unknown transform type "nope" (known: exclude, include, locality, metadata, override, rename)`},
		{"[{type: include, servics: [a]}]", "transforms[0].servics: unknown key"},
		{"[{type: include}, {type: exclude, services: ['[']}]", `transforms[1].services[0]: bad glob "["`},
		{"[{type: rename}]", "transforms[0].template: is required"},
		{"[{type: rename, template: '{{.Nme}}'}]", "transforms[0].template: "},
		{"[{type: rename, template: '{{'}]", "transforms[0].template: "},
		{"[{type: metadata}]", "transforms[0].set: at least one mapping is required"},
		{"[{type: metadata, set: [{tag: a}]}]", "transforms[0].set[0].key: is required"},
		{"[{type: metadata, set: [{tag: a, from: b, key: c}]}]", "transforms[0].set[0]: set exactly one of tag and from"},
		{"[{type: metadata, set: [{from: b, key: c, value: d}]}]", "transforms[0].set[0].value: only goes with tag"},
		{"[{type: override}]", "transforms[0].weight: set weight, priority or both"},
		{"[{type: override, weight: 0}]", "transforms[0].weight: 0 is outside 1..1048576"},
		{"[{type: override, weight: x}]", "transforms[0].weight: "},
		{"[{type: override, priority: 500}]", "transforms[0].priority: 500 is outside 0..127"},
		{"[{type: locality}]", "transforms[0].region: set region, zone, sub_zone or several"},
		{"[{type: locality, zone: '{{.Bad}}'}]", "transforms[0].zone: "},
	}
	for _, tt := range tests {
		t.Run(tt.transforms, func(t *testing.T) {
			_, err := chain(t, tt.transforms)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one starting with %q", err, tt.want)
			}
		})
	}
}
