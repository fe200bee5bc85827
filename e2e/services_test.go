package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// ep is one endpoint as written in services.yaml and as expected in the
// ClusterLoadAssignment. Zero Weight and empty Health are left out of the
// file, to exercise the defaults (1 and healthy).
type ep struct {
	Addr             string
	Port             uint32
	Weight, Priority uint32
	Health           string
	Region, Zone     string
	Meta             map[string]string
}

type svc struct {
	Name string
	EPs  []ep
}

// render writes services as a services.yaml.
func render(services []svc) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for _, s := range services {
		fmt.Fprintf(&b, "  - name: %s\n    endpoints:\n", s.Name)
		if len(s.EPs) == 0 {
			b.WriteString("      []\n")
		}
		for _, e := range s.EPs {
			fmt.Fprintf(&b, "      - address: %s\n        port: %d\n", e.Addr, e.Port)
			if e.Weight != 0 {
				fmt.Fprintf(&b, "        weight: %d\n", e.Weight)
			}
			if e.Priority != 0 {
				fmt.Fprintf(&b, "        priority: %d\n", e.Priority)
			}
			if e.Health != "" {
				fmt.Fprintf(&b, "        health: %s\n", e.Health)
			}
			if e.Region != "" || e.Zone != "" {
				fmt.Fprintf(&b, "        locality: {region: %q, zone: %q}\n", e.Region, e.Zone)
			}
			if len(e.Meta) > 0 {
				b.WriteString("        metadata:\n")
				for _, k := range slices.Sorted(maps.Keys(e.Meta)) {
					fmt.Fprintf(&b, "          %s: %q\n", k, e.Meta[k])
				}
			}
		}
	}
	return b.String()
}

// normalized is an endpoint as the client should see it: defaults applied,
// health in Envoy's enum spelling.
func (e ep) normalized() string {
	w := e.Weight
	if w == 0 {
		w = 1
	}
	h := strings.ToUpper(e.Health)
	if h == "" {
		h = "HEALTHY"
	}
	meta := ""
	for _, k := range slices.Sorted(maps.Keys(e.Meta)) {
		meta += k + "=" + e.Meta[k] + ";"
	}
	return fmt.Sprintf("%s:%d w=%d p=%d %s %s/%s {%s}", e.Addr, e.Port, w, e.Priority, h, e.Region, e.Zone, meta)
}

func (s svc) want() []string {
	out := make([]string, len(s.EPs))
	for i, e := range s.EPs {
		out[i] = e.normalized()
	}
	slices.Sort(out)
	return out
}

// endpoints lists what an assignment holds, in the form of ep.normalized.
func endpoints(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, group := range cla.GetEndpoints() {
		loc := group.GetLocality()
		for _, lb := range group.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			meta := ""
			if lbMeta := lb.GetMetadata().GetFilterMetadata()["envoy.lb"]; lbMeta != nil {
				fields := lbMeta.GetFields()
				for _, k := range slices.Sorted(maps.Keys(fields)) {
					meta += k + "=" + fields[k].GetStringValue() + ";"
				}
			}
			out = append(out, fmt.Sprintf("%s:%d w=%d p=%d %s %s/%s {%s}", sa.GetAddress(), sa.GetPortValue(),
				lb.GetLoadBalancingWeight().GetValue(), group.GetPriority(), lb.GetHealthStatus(),
				loc.GetRegion(), loc.GetZone(), meta))
		}
	}
	slices.Sort(out)
	return out
}

// quickstart mirrors examples/quickstart/services.yaml in spirit: a
// weighted service in two zones, one with a failover tier, one with
// metadata.
func quickstart() []svc {
	return []svc{
		{Name: "web", EPs: []ep{
			{Addr: "127.0.0.1", Port: 8081, Weight: 30, Region: "eu-west", Zone: "eu-west-1a"},
			{Addr: "127.0.0.1", Port: 8082, Weight: 10, Region: "eu-west", Zone: "eu-west-1b"},
		}},
		{Name: "api", EPs: []ep{
			{Addr: "127.0.0.1", Port: 9001},
			{Addr: "127.0.0.1", Port: 9002, Health: "draining"},
			{Addr: "127.0.0.1", Port: 9101, Priority: 1, Health: "unhealthy"},
		}},
		{Name: "payments", EPs: []ep{
			{Addr: "127.0.0.1", Port: 7001, Meta: map[string]string{"version": "v2", "track": "stable"}},
			{Addr: "127.0.0.2", Port: 7002, Health: "unknown", Meta: map[string]string{"version": "v3"}},
		}},
	}
}
