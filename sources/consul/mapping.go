package consul

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Endpoint metadata keys (filter_metadata["envoy.lb"]). Service meta
// entries are copied under their own keys and lose to these where the
// names collide.
const (
	// MetaTags holds the instance's Consul tags, sorted, deduplicated and
	// comma-joined ("a,b,c").
	MetaTags = "tags"
	// MetaTagPrefix + a tag is a key of its own with the value "true", so
	// that Envoy's subset load balancer can select on one tag
	// (subset_selectors keys: ["tag:canary"]).
	MetaTagPrefix = "tag:"
	// MetaNodePrefix + a node meta key holds the node's value.
	MetaNodePrefix = "node:"
	// MetaDatacenter holds the instance's datacenter.
	MetaDatacenter = "datacenter"
)

// maxWeight is the largest weight served, as Consul's own xDS does: the
// weights of a locality then never overflow Envoy's 32-bit sum.
const maxWeight = 128

// mapping turns the health entries of one service in one datacenter into
// endpoints. It is a pure function of its fields and the entries.
type mapping struct {
	addressSource   string
	warningDegraded bool
	criticalDrop    bool
	keepMesh        bool
	locality        LocalityConfig
	datacenter      string
	priority        uint32
}

// endpoints maps entries to endpoints in canonical order. Instances
// that cannot be served (no IP address, port outside 1..65535) are left out
// and counted in dropped, those with a host name instead of an IP (ESM
// external services, synced cloud load balancers) also in hostnames;
// instances left out because critical=drop, and proxies and gateways
// without keep_mesh, are not counted (that is configuration, not bad
// data).
func (m mapping) endpoints(entries []*api.ServiceEntry) (eps []sources.Endpoint, dropped, hostnames int) {
	eps = make([]sources.Endpoint, 0, len(entries))
	for _, e := range entries {
		if e == nil || e.Service == nil || e.Node == nil {
			dropped++
			continue
		}
		if !m.keepMesh && e.Service.Kind != api.ServiceKindTypical {
			continue // a proxy or gateway: not an ordinary cluster member
		}
		health, weight, keep := m.health(e)
		if !keep {
			continue
		}
		addr, port := m.address(e)
		ep := sources.Endpoint{
			Address:  addr,
			Port:     uint32(max(port, 0)),
			Weight:   weight,
			Priority: m.priority,
			Health:   health,
			Locality: m.localityOf(e.Node),
			Metadata: m.metadata(e),
			Origin:   sources.Origin{Record: "node " + e.Node.Node + " service " + e.Service.ID + " in " + m.datacenter},
		}
		if port <= 0 || port > 65535 || ep.Validate() != nil {
			dropped++
			if _, err := netip.ParseAddr(addr); err != nil && addr != "" {
				hostnames++
			}
			continue
		}
		// Canonical IP text, so that "::0001" and "::1" compare equal.
		ep.Address = netip.MustParseAddr(ep.Address).String()
		eps = append(eps, ep)
	}
	slices.SortFunc(eps, sources.Endpoint.Compare)
	return eps, dropped, hostnames
}

// meshOnly reports whether entries hold instances and all of them are
// proxies or gateways: the service is not served without keep_mesh.
func meshOnly(entries []*api.ServiceEntry) bool {
	for _, e := range entries {
		if e == nil || e.Service == nil || e.Service.Kind == api.ServiceKindTypical {
			return false
		}
	}
	return len(entries) > 0
}

// health aggregates node and service checks (Consul's own rule: any
// maintenance check, else the worst status) and picks the weight as
// Consul's own xDS does: Weights.Warning for a warning instance, else
// Weights.Passing, clamped to 1..128, and a weight of 0 (set on purpose:
// Weights.Warning 0 is the usual way to say "no traffic while warning")
// serves the instance UNHEALTHY. A warning instance is HEALTHY by default
// (Consul's behaviour: Envoy sends a DEGRADED host nothing while enough
// healthy ones exist), DEGRADED with warning: degraded.
func (m mapping) health(e *api.ServiceEntry) (h sources.Health, weight uint32, keep bool) {
	w := e.Service.Weights
	if w == (api.AgentWeights{}) {
		w = api.AgentWeights{Passing: 1, Warning: 1} // registered without weights
	}
	weight = clampWeight(w.Passing)
	switch e.Checks.AggregatedStatus() {
	case api.HealthMaint:
		h = sources.HealthDraining
	case api.HealthPassing:
		h = sources.HealthHealthy
	case api.HealthWarning:
		h, weight = sources.HealthHealthy, clampWeight(w.Warning)
		if m.warningDegraded {
			h = sources.HealthDegraded
		}
	case api.HealthCritical:
		if m.criticalDrop {
			return 0, 0, false
		}
		h = sources.HealthUnhealthy
	default: // a check status Consul does not document
		h = sources.HealthUnknown
	}
	if weight == 0 {
		return sources.HealthUnhealthy, 1, true
	}
	return h, weight, true
}

// clampWeight maps Consul's int weight onto 0..maxWeight (0: no traffic).
func clampWeight(w int) uint32 {
	return uint32(min(max(w, 0), maxWeight))
}

// address picks the address and port per address_source; the fallbacks
// follow Consul's DNS interface: service address, else node address.
func (m mapping) address(e *api.ServiceEntry) (string, int) {
	svc, node := e.Service, e.Node
	port := svc.Port
	switch m.addressSource {
	case AddressNode:
		return node.Address, port
	case AddressService:
	default:
		if ta, ok := svc.TaggedAddresses[m.addressSource]; ok && ta.Address != "" {
			if ta.Port != 0 {
				port = ta.Port
			}
			return ta.Address, port
		}
		if a := node.TaggedAddresses[m.addressSource]; a != "" {
			return a, port
		}
	}
	if svc.Address != "" {
		return svc.Address, port
	}
	return node.Address, port
}

func (m mapping) localityOf(n *api.Node) sources.Locality {
	l := sources.Locality{Region: m.datacenter}
	if m.locality.RegionKey != "" {
		if v := n.Meta[m.locality.RegionKey]; v != "" {
			l.Region = v
		}
	}
	if m.locality.ZoneKey != "" {
		l.Zone = n.Meta[m.locality.ZoneKey]
	}
	if m.locality.SubZoneKey != "" {
		l.SubZone = n.Meta[m.locality.SubZoneKey]
	}
	return l
}

// metadata copies service meta, then the tags (see MetaTags and
// MetaTagPrefix), the node meta (MetaNodePrefix) and the datacenter.
func (m mapping) metadata(e *api.ServiceEntry) map[string]string {
	s := e.Service
	md := make(map[string]string, len(s.Meta)+2*len(s.Tags)+len(e.Node.Meta)+2)
	maps.Copy(md, s.Meta)
	if len(s.Tags) > 0 {
		tags := slices.Clone(s.Tags)
		slices.Sort(tags)
		tags = slices.Compact(tags)
		md[MetaTags] = strings.Join(tags, ",")
		for _, t := range tags {
			md[MetaTagPrefix+t] = "true"
		}
	}
	for k, v := range e.Node.Meta {
		md[MetaNodePrefix+k] = v
	}
	md[MetaDatacenter] = m.datacenter
	return md
}
