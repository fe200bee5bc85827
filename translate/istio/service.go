package istio

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Result is the translation of one service.
type Result struct {
	// Resources are the service's ServiceEntry, then (in the WorkloadEntry
	// shape) one WorkloadEntry per served endpoint, by name.
	Resources []Resource
	// Dropped are the endpoints left out because their data cannot be
	// served, with the reason: the caller counts them as a source's
	// dropped endpoints are counted.
	Dropped []Drop
	// Unhealthy counts the endpoints left out for their health (unhealthy
	// or draining): state, not bad data.
	Unhealthy int
	// Standby counts the endpoints left out because a more preferred
	// priority has endpoints to serve (see the package doc).
	Standby int
}

// Drop is an endpoint left out, and why.
type Drop struct {
	// Endpoint is address:port.
	Endpoint string
	Err      error
}

// workload is one endpoint on its way to a WorkloadEntry.
type workload struct {
	addr     netip.Addr
	port     uint32
	priority uint32
	spec     *networkingv1alpha3.WorkloadEntry
}

// Service builds the Istio resources of svc and validates each against
// Istio's rules. svc is not modified; the result depends on nothing else,
// whatever the order of svc's endpoints.
//
// An error means the service cannot be served (its host, namespace or
// exportTo breaks a rule): the caller keeps its last good resources and
// reports the error as a translation error of the service.
func (t *Translator) Service(svc sources.Service) (Result, error) {
	res, err := t.service(svc)
	if err != nil {
		return Result{}, fmt.Errorf("translating service %q for Istio: %w", svc.Name, err)
	}
	return res, nil
}

func (t *Translator) service(svc sources.Service) (Result, error) {
	if svc.Name == "" {
		return Result{}, errors.New("empty name")
	}
	s := t.resolve(svc)
	name := resourceName(svc.Name)
	protocol := t.protocolOf(svc.Endpoints)
	se := &networkingv1alpha3.ServiceEntry{
		Hosts:      []string{t.render(svc)},
		Location:   s.location,
		Resolution: networkingv1alpha3.ServiceEntry_STATIC,
		ExportTo:   s.exportTo,
	}
	pname := portName(protocol)
	if n := cmp.Or(s.port, servicePort(svc.Endpoints, t.defaultPort)); n != 0 {
		se.Ports = []*networkingv1alpha3.ServicePort{{Number: n, Protocol: protocol, Name: pname}}
	}
	var res Result
	workloads := t.workloads(svc.Endpoints, protocol, pname, &res)
	var selector map[string]string
	if t.shape == ShapeWorkloadEntries {
		selector = map[string]string{SelectorLabel: name}
		se.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: selector}
	} else {
		se.Endpoints = make([]*networkingv1alpha3.WorkloadEntry, len(workloads))
		for i, w := range workloads {
			se.Endpoints[i] = w.spec
		}
	}
	if err := checkServiceEntry(s.namespace, name, se); err != nil {
		return Result{}, err
	}
	r, err := newResource(ServiceEntry, s.namespace, name, se)
	if err != nil {
		return Result{}, err
	}
	res.Resources = append(res.Resources, r)
	if t.shape == ShapeInline {
		return res, nil
	}
	ports := make(map[string]bool, len(se.Ports))
	for _, p := range se.Ports {
		ports[p.GetName()] = true
	}
	for _, w := range workloads {
		w.spec.Labels[SelectorLabel] = name
		wname := workloadName(name, w.addr, w.port)
		if err := checkWorkloadEntry(s.namespace, wname, w.spec, ports, selector); err != nil {
			res.Dropped = append(res.Dropped, drop(w.addr, w.port, err))
			continue
		}
		r, err := newResource(WorkloadEntry, s.namespace, wname, w.spec)
		if err != nil {
			return Result{}, err
		}
		res.Resources = append(res.Resources, r)
	}
	slices.SortFunc(res.Resources[1:], func(a, b Resource) int { return cmp.Compare(a.Name, b.Name) })
	return res, nil
}

// workloads returns the endpoints to serve, in canonical order (see
// sources.Endpoint.Compare), as workloads of the service port pname: the
// healthy ones (healthy, degraded or of unknown health) whose data is
// valid, each address:port once (its most preferred copy), of the most
// preferred priority that has any. It counts what it leaves out in res.
func (t *Translator) workloads(eps []sources.Endpoint, protocol, pname string, res *Result) []workload {
	sorted := make([]*sources.Endpoint, len(eps))
	for i := range eps {
		sorted[i] = &eps[i]
	}
	slices.SortFunc(sorted, func(a, b *sources.Endpoint) int { return a.Compare(*b) })
	out := make([]workload, 0, len(sorted))
	seen := make(map[netip.AddrPort]bool, len(sorted))
	for _, e := range sorted {
		if e.Health == sources.HealthUnhealthy || e.Health == sources.HealthDraining {
			res.Unhealthy++
			continue
		}
		w, err := t.workload(e, protocol, pname)
		if err != nil {
			res.Dropped = append(res.Dropped, Drop{Endpoint: endpointName(e), Err: err})
			continue
		}
		ap := netip.AddrPortFrom(w.addr, uint16(w.port))
		if seen[ap] {
			continue // a less preferred copy of an endpoint already served
		}
		seen[ap] = true
		out = append(out, w)
	}
	if len(out) == 0 {
		return out
	}
	// Sorted by priority first: the most preferred served tier leads.
	best := out[0].priority
	n := 0
	for _, w := range out {
		if w.priority == best {
			out[n] = w
			n++
		}
	}
	res.Standby += len(out) - n
	return out[:n]
}

// workload builds the WorkloadEntry of one endpoint and checks it, or
// says why the endpoint cannot be served.
func (t *Translator) workload(e *sources.Endpoint, protocol, pname string) (workload, error) {
	if p, declared, ok := t.declared(e); declared && !ok {
		return workload{}, fmt.Errorf("declares protocol %q (%s), which Istio does not serve on a service port", p, t.protocolKey)
	} else if declared && p != protocol {
		return workload{}, fmt.Errorf("declares protocol %s where the service's other instances declare %s", p, protocol)
	}
	addr, err := netip.ParseAddr(e.Address)
	if err != nil {
		return workload{}, fmt.Errorf("address %q is not an IP address", e.Address)
	}
	for _, part := range []string{e.Locality.Region, e.Locality.Zone, e.Locality.SubZone} {
		if strings.Contains(part, "/") {
			return workload{}, fmt.Errorf("locality part %q contains '/', Istio's separator", part)
		}
	}
	spec := &networkingv1alpha3.WorkloadEntry{
		Address:  addr.String(),
		Ports:    map[string]uint32{pname: e.Port},
		Labels:   labels(e),
		Locality: locality(e.Locality),
	}
	if e.Weight > 1 {
		spec.Weight = e.Weight // 0, Istio's default, serves as 1
	}
	if err := checkWorkload(spec, map[string]bool{pname: true}); err != nil {
		return workload{}, err
	}
	return workload{addr: addr, port: e.Port, priority: e.Priority, spec: spec}, nil
}

// locality writes l as Istio does: region/zone/subzone, without the empty
// parts at the end.
func locality(l sources.Locality) string {
	switch {
	case l.SubZone != "":
		return l.Region + "/" + l.Zone + "/" + l.SubZone
	case l.Zone != "":
		return l.Region + "/" + l.Zone
	}
	return l.Region
}

func endpointName(e *sources.Endpoint) string {
	return fmt.Sprintf("%s:%d", e.Address, e.Port)
}

func drop(addr netip.Addr, port uint32, err error) Drop {
	return Drop{Endpoint: netip.AddrPortFrom(addr, uint16(port)).String(), Err: err}
}

// servicePort returns the service port's number for eps: the port most of
// them listen on when at least two share it (the lowest of those tied), or
// the port of the only one; when every endpoint listens on a port of its
// own (ports a scheduler assigns, such as Nomad's dynamic ports), it is
// fallback, since a port taken from whichever endpoints happen to be
// registered would move as they come and go, and a client that calls the
// service by host and port would lose it each time. 0 without endpoints.
// Every endpoint counts, healthy or not, so that the port does not move
// when instances fail their checks; but not one on port 0, which is never
// served and could otherwise become the service's port (leaving it without
// one).
func servicePort(eps []sources.Endpoint, fallback uint32) uint32 {
	counts := make(map[uint32]int, 1)
	var best uint32
	n := 0
	for _, e := range eps {
		if e.Port == 0 {
			continue
		}
		n++
		counts[e.Port]++
		if c, b := counts[e.Port], counts[best]; c > b || c == b && e.Port < best {
			best = e.Port
		}
	}
	if n > 1 && counts[best] < 2 {
		return fallback
	}
	return best
}
