package consul

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// MetaTags is the endpoint metadata key holding the instance's Consul tags,
// sorted, deduplicated and comma-joined ("a,b,c"). Service meta entries are
// copied under their own keys; a service meta key named "tags" is shadowed
// by the tags.
const MetaTags = "tags"

// mapping turns the health entries of one service in one datacenter into
// endpoints. It is a pure function of its fields and the entries.
type mapping struct {
	addressSource  string
	warningHealthy bool
	criticalDrop   bool
	locality       LocalityConfig
	datacenter     string
	priority       uint32
}

// endpoints maps entries to endpoints in canonical order. Instances
// that cannot be served (no IP address, port outside 1..65535) are left out
// and counted in dropped; instances left out because critical=drop are not
// counted (that is configuration, not bad data).
func (m mapping) endpoints(entries []*api.ServiceEntry) (eps []sources.Endpoint, dropped int) {
	eps = make([]sources.Endpoint, 0, len(entries))
	for _, e := range entries {
		if e == nil || e.Service == nil || e.Node == nil {
			dropped++
			continue
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
			Metadata: metadata(e.Service),
			Origin:   sources.Origin{Record: "node " + e.Node.Node + " service " + e.Service.ID + " in " + m.datacenter},
		}
		if port <= 0 || port > 65535 || ep.Validate() != nil {
			dropped++
			continue
		}
		// Canonical IP text, so that "::0001" and "::1" compare equal.
		ep.Address = netip.MustParseAddr(ep.Address).String()
		eps = append(eps, ep)
	}
	slices.SortFunc(eps, sources.Endpoint.Compare)
	return eps, dropped
}

// health aggregates node and service checks (Consul's own rule: any
// maintenance check, else the worst status) and picks the weight Consul's
// DNS interface would use.
func (m mapping) health(e *api.ServiceEntry) (h sources.Health, weight uint32, keep bool) {
	w := e.Service.Weights
	switch e.Checks.AggregatedStatus() {
	case api.HealthMaint:
		return sources.HealthDraining, clampWeight(w.Passing), true
	case api.HealthPassing:
		return sources.HealthHealthy, clampWeight(w.Passing), true
	case api.HealthWarning:
		if m.warningHealthy {
			return sources.HealthHealthy, clampWeight(w.Warning), true
		}
		return sources.HealthDegraded, clampWeight(w.Warning), true
	case api.HealthCritical:
		if m.criticalDrop {
			return 0, 0, false
		}
		return sources.HealthUnhealthy, clampWeight(w.Passing), true
	default: // a check status Consul does not document
		return sources.HealthUnknown, clampWeight(w.Passing), true
	}
}

// clampWeight maps Consul's int weight onto the model (0 = unset = 1).
func clampWeight(w int) uint32 {
	if w <= 0 {
		return 0
	}
	return uint32(min(w, 1<<31))
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

// metadata copies service meta and the tags (see MetaTags).
func metadata(s *api.AgentService) map[string]string {
	if len(s.Meta) == 0 && len(s.Tags) == 0 {
		return nil
	}
	md := make(map[string]string, len(s.Meta)+1)
	for k, v := range s.Meta {
		md[k] = v
	}
	if len(s.Tags) > 0 {
		tags := slices.Clone(s.Tags)
		slices.Sort(tags)
		md[MetaTags] = strings.Join(slices.Compact(tags), ",")
	}
	return md
}
