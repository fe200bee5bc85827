package sources

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Health is the health of one endpoint as the registry reports it.
type Health uint8

// The health states of the model. They map one to one onto Envoy's
// HealthStatus (see translate); Unknown is the zero value so that a source
// which knows nothing about health does not claim an endpoint is healthy.
const (
	HealthUnknown Health = iota
	HealthHealthy
	HealthUnhealthy
	HealthDegraded
	HealthDraining
)

var healthNames = [...]string{"unknown", "healthy", "unhealthy", "degraded", "draining"}

// String returns the lower-case name used in configuration files.
func (h Health) String() string {
	if int(h) < len(healthNames) {
		return healthNames[h]
	}
	return fmt.Sprintf("health(%d)", h)
}

// ParseHealth parses the lower-case names returned by String.
func ParseHealth(s string) (Health, error) {
	for i, n := range healthNames {
		if strings.EqualFold(s, n) {
			return Health(i), nil
		}
	}
	return HealthUnknown, fmt.Errorf("unknown health %q (want one of %s)", s, strings.Join(healthNames[:], ", "))
}

// Locality is where an endpoint runs. All fields are optional.
type Locality struct {
	Region  string
	Zone    string
	SubZone string
}

// Compare orders localities by region, zone, then sub-zone.
func (l Locality) Compare(o Locality) int {
	return cmp.Or(cmp.Compare(l.Region, o.Region), cmp.Compare(l.Zone, o.Zone), cmp.Compare(l.SubZone, o.SubZone))
}

// Endpoint is one network address of a service.
//
// Address is an IP literal (v4 or v6); sources resolve host names before they
// emit an endpoint, because Envoy's EDS accepts only IPs. Weight 0 means "not
// set" and is served as 1. Priority is the failover tier, 0 being the most
// preferred; it need not be contiguous (translate makes it so).
type Endpoint struct {
	Address  string
	Port     uint32
	Weight   uint32
	Priority uint32
	Health   Health
	Locality Locality
	// Metadata is copied into the endpoint's filter_metadata["envoy.lb"].
	Metadata map[string]string
	// Origin says where the endpoint came from; it is never served (see
	// provenance.go).
	Origin Origin
}

// Validate reports why an endpoint cannot be served: a non-IP address, one
// that cannot be an upstream (see CheckUpstream), or a port outside
// 1..65535. Sources drop (and count) endpoints that fail it; the manager
// drops whatever a source let through.
func (e Endpoint) Validate() error {
	addr, err := netip.ParseAddr(e.Address)
	if err != nil {
		return fmt.Errorf("address %q is not an IP address", e.Address)
	}
	if err := CheckUpstream(addr); err != nil {
		return fmt.Errorf("address %q cannot be an upstream: %w", e.Address, err)
	}
	if e.Port == 0 || e.Port > 65535 {
		return fmt.Errorf("port %d is outside 1..65535", e.Port)
	}
	return nil
}

// Compare orders endpoints by priority, locality, address, then port: the
// order translate emits them in.
func (e Endpoint) Compare(o Endpoint) int {
	return cmp.Or(cmp.Compare(e.Priority, o.Priority), e.Locality.Compare(o.Locality),
		cmp.Compare(e.Address, o.Address), cmp.Compare(e.Port, o.Port))
}

// Equal reports whether two endpoints are served identically, metadata
// included. Origin is left out: it is not served, and a change of
// provenance alone (an identical copy from another source showing through)
// is no change to publish.
func (e Endpoint) Equal(o Endpoint) bool {
	return e.Address == o.Address && e.Port == o.Port && e.Weight == o.Weight &&
		e.Priority == o.Priority && e.Health == o.Health && e.Locality == o.Locality &&
		maps.Equal(e.Metadata, o.Metadata)
}

// Service is a named set of endpoints; it becomes one Envoy cluster whose
// name is Name. A service with no endpoints is a real state (the registry
// said "none"), served as a cluster with an empty assignment.
type Service struct {
	Name      string
	Endpoints []Endpoint
	// Source is the configured name of the source that reported the
	// service; the manager sets it on every update it receives. A union or
	// weighted merge names the first source it serves.
	Source string
	// Localities, when not nil, fixes the load-balancing weight of each
	// (priority, locality) group of endpoints and asks clients to balance
	// between localities by those weights (Envoy's locality-weighted load
	// balancing). Sources leave it nil: a group then weighs the sum of its
	// endpoints' weights. The weighted merge mode sets it, sorted by
	// priority then locality.
	Localities []LocalityWeight
}

// LocalityWeight is the weight of the endpoints of one locality at one
// priority (see Service.Localities).
type LocalityWeight struct {
	Priority uint32
	Locality Locality
	Weight   uint32
}

// Sort puts the endpoints in their canonical order (see Endpoint.Compare) so
// that equal services compare equal and translate deterministically.
func (s *Service) Sort() {
	slices.SortFunc(s.Endpoints, Endpoint.Compare)
}

// Equal reports whether two services have the same name and the same
// endpoints in the same order (see Endpoint.Equal; Source is left out like
// Origin), and the same locality weights. Sort both first to compare as
// sets.
func (s Service) Equal(o Service) bool {
	return s.Name == o.Name && slices.EqualFunc(s.Endpoints, o.Endpoints, Endpoint.Equal) &&
		slices.Equal(s.Localities, o.Localities) && (s.Localities == nil) == (o.Localities == nil)
}

// Clone returns a deep copy, so that a receiver may keep it while the sender
// goes on mutating its own.
func (s Service) Clone() Service {
	c := Service{Name: s.Name, Source: s.Source, Endpoints: slices.Clone(s.Endpoints), Localities: slices.Clone(s.Localities)}
	for i := range c.Endpoints {
		c.Endpoints[i].Metadata = maps.Clone(c.Endpoints[i].Metadata)
		c.Endpoints[i].Origin.Transforms = slices.Clone(c.Endpoints[i].Origin.Transforms)
	}
	return c
}

// CheckUpstream reports why addr cannot be an upstream address: the
// unspecified addresses (0.0.0.0, ::), which mean "this host" only to a
// listener; multicast and the limited broadcast address, which no TCP
// connection reaches; and zone-scoped IPv6 (fe80::1%eth0), whose zone
// names an interface of the registry's host, not of the client's.
func CheckUpstream(addr netip.Addr) error {
	switch {
	case !addr.IsValid():
		return errors.New("not an IP address")
	case addr.IsUnspecified():
		return fmt.Errorf("%s is the unspecified address", addr)
	case addr.IsMulticast():
		return fmt.Errorf("%s is a multicast address", addr)
	case addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s is the broadcast address", addr)
	case addr.Zone() != "":
		return fmt.Errorf("%s is scoped to an interface of the registry's host", addr)
	}
	return nil
}
