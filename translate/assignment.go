package translate

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xdsbridge/xdsbridge/sources"
)

// MetadataNamespace is the filter_metadata key endpoint metadata goes under;
// Envoy's subset load balancer and gRPC's hash_key read it there.
const MetadataNamespace = "envoy.lb"

// healthStatus maps sources.Health (the index) one to one onto Envoy's.
var healthStatus = [...]corev3.HealthStatus{
	sources.HealthUnknown:   corev3.HealthStatus_UNKNOWN,
	sources.HealthHealthy:   corev3.HealthStatus_HEALTHY,
	sources.HealthUnhealthy: corev3.HealthStatus_UNHEALTHY,
	sources.HealthDegraded:  corev3.HealthStatus_DEGRADED,
	sources.HealthDraining:  corev3.HealthStatus_DRAINING,
}

// endpointSlab holds every message of one LbEndpoint so that an assignment
// costs one allocation for all its endpoints rather than eight per endpoint.
type endpointSlab struct {
	lb       endpointv3.LbEndpoint
	ident    endpointv3.LbEndpoint_Endpoint
	ep       endpointv3.Endpoint
	addr     corev3.Address
	addrSock corev3.Address_SocketAddress
	sock     corev3.SocketAddress
	port     corev3.SocketAddress_PortValue
	weight   wrapperspb.UInt32Value
}

// groupSlab holds the messages of one LocalityLbEndpoints likewise.
type groupSlab struct {
	lle      endpointv3.LocalityLbEndpoints
	locality corev3.Locality
	weight   wrapperspb.UInt32Value
}

// valueSlab holds one string metadata value.
type valueSlab struct {
	v structpb.Value
	s structpb.Value_StringValue
}

// Assignment builds the ClusterLoadAssignment of svc: endpoints grouped by
// (priority, locality), groups in that order, endpoints by (address, port).
// Priorities are renumbered 0, 1, 2... in ascending order, because Envoy and
// gRPC reject gaps; each group's weight is the sum of its endpoints' weights
// so that gRPC's per-locality pick matches a flat weighted pick, unless
// svc.Localities fixes the group's weight. A later copy of an address:port
// already emitted is left out (see Service). An empty service yields an
// assignment without endpoints: a real state, not an error.
func Assignment(svc sources.Service) (*endpointv3.ClusterLoadAssignment, error) {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: svc.Name}
	if len(svc.Endpoints) == 0 {
		return cla, nil
	}
	eps, err := canonical(svc.Endpoints)
	if err != nil {
		return nil, err
	}

	ngroups := 1
	for i := 1; i < len(eps); i++ {
		if !sameGroup(eps[i-1], eps[i]) {
			ngroups++
		}
	}
	slab := make([]endpointSlab, len(eps))
	lbs := make([]*endpointv3.LbEndpoint, len(eps))
	groups := make([]groupSlab, ngroups)
	cla.Endpoints = make([]*endpointv3.LocalityLbEndpoints, ngroups)
	var meta metadataCache

	var g, start, priority int
	var prioritySum uint64
	for i, e := range eps {
		lbs[i] = lbEndpoint(&slab[i], e, &meta)
		if i+1 < len(eps) && sameGroup(e, eps[i+1]) {
			continue
		}
		// eps[start:i+1] is one group.
		if g > 0 && e.Priority != eps[start-1].Priority {
			priority++
			prioritySum = 0
		}
		var sum uint64
		for _, lb := range lbs[start : i+1] {
			sum += uint64(lb.LoadBalancingWeight.Value)
		}
		// Envoy and gRPC both cap the weights of a priority at uint32.
		if prioritySum += sum; prioritySum > math.MaxUint32 {
			return nil, fmt.Errorf("endpoint weights of priority %d sum beyond %d", e.Priority, uint32(math.MaxUint32))
		}
		weight := groupWeight(svc, e.Priority, e.Locality, uint32(sum))
		cla.Endpoints[g] = localityGroup(&groups[g], e.Locality, uint32(priority), weight, lbs[start:i+1:i+1])
		g++
		start = i + 1
	}
	return cla, nil
}

// canonical validates the endpoints in and returns pointers to them in output order,
// without repeated address:port pairs.
func canonical(in []sources.Endpoint) ([]*sources.Endpoint, error) {
	eps := make([]*sources.Endpoint, len(in))
	for i := range in {
		e := &in[i]
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i, err)
		}
		if int(e.Health) >= len(healthStatus) {
			return nil, fmt.Errorf("endpoint %d: unknown %v", i, e.Health)
		}
		eps[i] = e
	}
	// Sort by address first so that repeats are adjacent, the preferred copy
	// first; total makes the choice among exact ties independent of input order.
	slices.SortFunc(eps, func(a, b *sources.Endpoint) int {
		if c := cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port)); c != 0 {
			return c
		}
		return total(a, b) // cmp.Or would evaluate it eagerly
	})
	eps = slices.CompactFunc(eps, func(a, b *sources.Endpoint) bool {
		return a.Address == b.Address && a.Port == b.Port
	})
	// Address and port are now unique, so Compare is a total order.
	slices.SortFunc(eps, func(a, b *sources.Endpoint) int { return a.Compare(*b) })
	return eps, nil
}

// total orders endpoints by every field, metadata last.
func total(a, b *sources.Endpoint) int {
	if c := cmp.Or(a.Compare(*b), cmp.Compare(a.Weight, b.Weight), cmp.Compare(a.Health, b.Health)); c != 0 {
		return c
	}
	return compareMetadata(a.Metadata, b.Metadata)
}

// compareMetadata orders maps by their sorted (key, value) pairs. It
// allocates, but runs only to break exact ties between repeated endpoints.
func compareMetadata(a, b map[string]string) int {
	ka, kb := slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))
	for i := 0; i < len(ka) && i < len(kb); i++ {
		if c := cmp.Or(cmp.Compare(ka[i], kb[i]), cmp.Compare(a[ka[i]], b[kb[i]])); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ka), len(kb))
}

func sameGroup(a, b *sources.Endpoint) bool {
	return a.Priority == b.Priority && a.Locality == b.Locality
}

// lbEndpoint fills s for e and returns its LbEndpoint.
func lbEndpoint(s *endpointSlab, e *sources.Endpoint, meta *metadataCache) *endpointv3.LbEndpoint {
	s.port.PortValue = e.Port
	s.sock.Protocol = corev3.SocketAddress_TCP
	s.sock.Address = e.Address
	s.sock.PortSpecifier = &s.port
	s.addrSock.SocketAddress = &s.sock
	s.addr.Address = &s.addrSock
	s.ep.Address = &s.addr
	s.ident.Endpoint = &s.ep
	s.weight.Value = max(e.Weight, 1)
	s.lb.HostIdentifier = &s.ident
	s.lb.HealthStatus = healthStatus[e.Health]
	s.lb.LoadBalancingWeight = &s.weight
	if len(e.Metadata) > 0 {
		s.lb.Metadata = meta.get(e.Metadata)
	}
	return &s.lb
}

// metadataCache builds filter_metadata["envoy.lb"] messages, reusing the
// message of an equal map met shortly before: endpoints of one service
// mostly carry the same few labels, and a shared sub-message marshals the
// same as a copy while saving five allocations.
type metadataCache struct {
	recent [4]struct {
		m   map[string]string
		msg *corev3.Metadata
	}
	next int
}

// get returns the metadata message for m, which is not empty.
func (c *metadataCache) get(m map[string]string) *corev3.Metadata {
	for _, r := range c.recent {
		if r.msg != nil && maps.Equal(r.m, m) {
			return r.msg
		}
	}
	msg := metadata(m)
	c.recent[c.next].m, c.recent[c.next].msg = m, msg
	c.next = (c.next + 1) % len(c.recent)
	return msg
}

// metadata builds filter_metadata["envoy.lb"] holding m's pairs as strings.
// Map order does not matter: the fields land in a map, which deterministic
// marshalling sorts.
func metadata(m map[string]string) *corev3.Metadata {
	vals := make([]valueSlab, len(m))
	fields := make(map[string]*structpb.Value, len(m))
	i := 0
	for k, v := range m {
		vs := &vals[i]
		vs.s.StringValue = v
		vs.v.Kind = &vs.s
		fields[k] = &vs.v
		i++
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		MetadataNamespace: {Fields: fields},
	}}
}

// validateAssignment is cla.ValidateAll for an assignment fresh from
// Assignment, minus the repeats: the endpoints share metadata messages (see
// metadataCache) whose validation allocates, so each distinct one is
// validated once and the rest of cla with metadata detached. cla has not
// been handed out yet, so detaching and restoring it races with nobody.
func validateAssignment(cla *endpointv3.ClusterLoadAssignment) error {
	n := 0
	for _, g := range cla.Endpoints {
		n += len(g.LbEndpoints)
	}
	saved := make([]*corev3.Metadata, 0, n)
	var last *corev3.Metadata
	var err error
	for _, g := range cla.Endpoints {
		for _, lb := range g.LbEndpoints {
			md := lb.Metadata
			saved = append(saved, md)
			if md != nil && md != last && err == nil {
				if err = md.ValidateAll(); err != nil {
					err = fmt.Errorf("metadata of endpoint %v: %w", lb.GetEndpoint().GetAddress(), err)
				}
				last = md
			}
			lb.Metadata = nil
		}
	}
	if err == nil {
		err = cla.ValidateAll()
	}
	for _, g := range cla.Endpoints {
		for _, lb := range g.LbEndpoints {
			lb.Metadata, saved = saved[0], saved[1:]
		}
	}
	return err
}

// localityGroup fills s as the group of lbs at locality l.
func localityGroup(s *groupSlab, l sources.Locality, priority, weight uint32, lbs []*endpointv3.LbEndpoint) *endpointv3.LocalityLbEndpoints {
	// gRPC rejects a group without a locality, even an empty one.
	s.locality.Region, s.locality.Zone, s.locality.SubZone = l.Region, l.Zone, l.SubZone
	s.weight.Value = max(weight, 1)
	s.lle.Locality = &s.locality
	s.lle.LbEndpoints = lbs
	s.lle.LoadBalancingWeight = &s.weight
	s.lle.Priority = priority
	return &s.lle
}
