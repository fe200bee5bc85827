package istio

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
)

// The checks below are the rules istiod applies to a ServiceEntry and a
// WorkloadEntry before it stores one it received over MCP (istio/istio
// pkg/config/validation: ValidateServiceEntry, ValidateWorkloadEntry), for
// the fields this package sets, plus a few invariants of its own output
// that istiod would accept but serve wrongly (noted where they apply).
// They matter because istiod never NACKs an MCP resource: it logs the
// failure, acknowledges the response and keeps the resource's previous
// version (or none), so a bad resource is silent on the bridge's side
// unless it is caught here.

// checkServiceEntry reports the first rule se breaks as the ServiceEntry
// name in namespace ns.
func checkServiceEntry(ns, name string, se *networkingv1alpha3.ServiceEntry) error {
	if err := checkObjectName(ns, name); err != nil {
		return err
	}
	if len(se.GetHosts()) == 0 {
		return errors.New("a service entry needs at least one host")
	}
	for _, h := range se.GetHosts() {
		if err := checkHost(h); err != nil {
			return err
		}
	}
	if se.GetResolution() != networkingv1alpha3.ServiceEntry_STATIC {
		// The bridge resolves every address itself; any other resolution
		// would make istiod resolve or pass traffic through instead.
		return fmt.Errorf("resolution %s: only STATIC is served", se.GetResolution())
	}
	switch se.GetLocation() {
	case networkingv1alpha3.ServiceEntry_MESH_INTERNAL, networkingv1alpha3.ServiceEntry_MESH_EXTERNAL:
	default:
		return fmt.Errorf("unknown location %d", se.GetLocation())
	}
	ports, err := checkPorts(se.GetPorts())
	if err != nil {
		return err
	}
	if len(se.GetHosts()) > 1 {
		for _, p := range se.GetPorts() {
			if !httpOrTLS(p.GetProtocol()) {
				return fmt.Errorf("port %q: several hosts need HTTP or TLS ports to tell them apart, not %s", p.GetName(), p.GetProtocol())
			}
		}
	}
	if se.GetWorkloadSelector() != nil && len(se.GetEndpoints()) > 0 {
		return errors.New("a service entry has either a workload selector or endpoints, not both")
	}
	if s := se.GetWorkloadSelector(); s != nil {
		if se.GetLocation() != networkingv1alpha3.ServiceEntry_MESH_INTERNAL {
			// Istio's API applies a workload selector to MESH_INTERNAL
			// entries only; istiod does not check it.
			return errors.New("a workload selector applies to MESH_INTERNAL entries only")
		}
		if err := checkSelector(s.GetLabels()); err != nil {
			return err
		}
	}
	var sum uint64
	for i, e := range se.GetEndpoints() {
		if e == nil {
			return fmt.Errorf("endpoints[%d] is null", i)
		}
		if err := checkWorkload(e, ports); err != nil {
			return fmt.Errorf("endpoints[%d]: %w", i, err)
		}
		sum += uint64(max(e.GetWeight(), 1))
	}
	if sum > math.MaxUint32 {
		// Envoy refuses a locality whose endpoint weights sum beyond
		// uint32; istiod would accept the entry and every proxy NACK it.
		return fmt.Errorf("endpoint weights sum to %d, beyond %d", sum, uint32(math.MaxUint32))
	}
	return checkExportTo(ns, se.GetExportTo())
}

// checkWorkloadEntry reports the first rule we breaks as the WorkloadEntry
// name in namespace ns, selected by a ServiceEntry with the given port
// names and selector labels.
func checkWorkloadEntry(ns, name string, we *networkingv1alpha3.WorkloadEntry, ports map[string]bool, selector map[string]string) error {
	if err := checkObjectName(ns, name); err != nil {
		return err
	}
	for k, v := range selector {
		if got, ok := we.GetLabels()[k]; !ok || got != v {
			// Not an istiod rule: a WorkloadEntry its ServiceEntry does not
			// select serves nothing.
			return fmt.Errorf("label %s=%s of the service entry's selector is missing", k, v)
		}
	}
	return checkWorkload(we, ports)
}

// checkWorkload checks one workload: an inline endpoint of a STATIC
// ServiceEntry or a WorkloadEntry it selects.
func checkWorkload(we *networkingv1alpha3.WorkloadEntry, ports map[string]bool) error {
	addr, err := netip.ParseAddr(we.GetAddress())
	if err != nil || addr.Zone() != "" {
		// istiod accepts a host name in a WorkloadEntry (for DNS
		// resolution), but the STATIC entries selecting it need an IP.
		return fmt.Errorf("address %q is not an IP address", we.GetAddress())
	}
	for _, n := range slices.Sorted(maps.Keys(we.GetPorts())) {
		if !ports[n] {
			// Without its name among the service's ports, Istio would send
			// that port's traffic to the endpoint on the service port's
			// number instead.
			return fmt.Errorf("port %q is not a port of the service entry", n)
		}
		if err := checkPortNumber(we.GetPorts()[n]); err != nil {
			return fmt.Errorf("port %q: %w", n, err)
		}
	}
	if err := checkLabels(we.GetLabels()); err != nil {
		return err
	}
	if parts := strings.Split(we.GetLocality(), "/"); len(parts) > 3 {
		return fmt.Errorf("locality %q has more than region/zone/subzone", we.GetLocality())
	}
	return nil
}

// checkObjectName checks a resource's namespace (a DNS-1123 label) and
// name (a DNS-1123 subdomain), the syntax of Kubernetes object names that
// istiod's configuration store assumes.
func checkObjectName(ns, name string) error {
	if !isDNSLabel(ns) {
		return fmt.Errorf("namespace %q is not a DNS-1123 label", ns)
	}
	if !isDNSSubdomain(name) {
		return fmt.Errorf("name %q is not a DNS-1123 subdomain", name)
	}
	return nil
}

// checkHost checks one host: a fully qualified domain name of at most 255
// characters whose labels are DNS-1123 labels (letters of either case) and
// whose top-level label is not all digits. A trailing dot is allowed.
// Wildcards, which istiod allows in some resolutions, are refused: every
// service here is one concrete name.
func checkHost(h string) error {
	if h == "" || len(h) > 255 {
		return fmt.Errorf("host %q: a host has 1 to 255 characters", h)
	}
	if strings.Contains(h, "*") {
		return fmt.Errorf("host %q: wildcard hosts are not served", h)
	}
	labels := strings.Split(strings.TrimSuffix(h, "."), ".")
	if _, err := strconv.Atoi(labels[len(labels)-1]); err == nil {
		return fmt.Errorf("host %q: the top-level domain cannot be all digits", h)
	}
	for _, l := range labels {
		if !isDNSLabel(strings.ToLower(l)) {
			return fmt.Errorf("host %q: label %q is not a DNS-1123 label", h, l)
		}
	}
	return nil
}

// checkPorts checks the service ports and returns their names: no null
// port, unique names and numbers, names that are DNS-1123 labels, a
// protocol Istio supports on a service port, numbers and target ports in
// 1..65535.
func checkPorts(ports []*networkingv1alpha3.ServicePort) (map[string]bool, error) {
	names := make(map[string]bool, len(ports))
	numbers := make(map[uint32]bool, len(ports))
	for i, p := range ports {
		if p == nil {
			return nil, fmt.Errorf("ports[%d] is null", i)
		}
		if names[p.GetName()] {
			return nil, fmt.Errorf("port name %q is defined twice", p.GetName())
		}
		if numbers[p.GetNumber()] {
			return nil, fmt.Errorf("port %d is defined twice", p.GetNumber())
		}
		names[p.GetName()], numbers[p.GetNumber()] = true, true
		if !isDNSLabel(p.GetName()) {
			return nil, fmt.Errorf("port name %q is not a DNS-1123 label", p.GetName())
		}
		if _, ok := parseProtocol(p.GetProtocol()); !ok {
			return nil, fmt.Errorf("port %q: unsupported protocol %q", p.GetName(), p.GetProtocol())
		}
		if err := checkPortNumber(p.GetNumber()); err != nil {
			return nil, fmt.Errorf("port %q: %w", p.GetName(), err)
		}
		if t := p.GetTargetPort(); t != 0 {
			if err := checkPortNumber(t); err != nil {
				return nil, fmt.Errorf("port %q: target %w", p.GetName(), err)
			}
		}
	}
	return names, nil
}

func checkPortNumber(n uint32) error {
	if n < 1 || n > 65535 {
		return fmt.Errorf("port number %d is outside 1..65535", n)
	}
	return nil
}

// checkLabels checks label keys and values against Kubernetes label
// syntax (which istiod enforces, but for the value's length).
func checkLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if !isLabelKey(k) {
			return fmt.Errorf("label key %q is invalid", k)
		}
		if !isLabelValue(labels[k]) {
			return fmt.Errorf("label %s: value %q is invalid", k, labels[k])
		}
	}
	return nil
}

// checkSelector checks a workload selector: at least one label (istiod
// only warns, but an empty selector selects every workload of the
// namespace), no empty key, no wildcard, valid label syntax.
func checkSelector(labels map[string]string) error {
	if len(labels) == 0 {
		return errors.New("the workload selector has no labels")
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if strings.Contains(k, "*") || strings.Contains(labels[k], "*") {
			return fmt.Errorf("workload selector %s=%s: wildcards are not supported", k, labels[k])
		}
	}
	return checkLabels(labels)
}

// checkExportTo checks exportTo as istiod does for a ServiceEntry in
// namespace ns: each entry is ".", "*", "~" or a namespace (a DNS-1123
// label); no entry twice ("." counts as ns); "*" and "~" only alone.
func checkExportTo(ns string, exportTo []string) error {
	seen := make(map[string]bool, len(exportTo))
	for _, e := range exportTo {
		key := e
		if e == "." {
			key = ns
		}
		if seen[key] {
			return fmt.Errorf("exportTo has %q twice (\".\" is the namespace %s)", e, ns)
		}
		seen[key] = true
		if e != "." && e != "*" && e != "~" && !isDNSLabel(e) {
			return fmt.Errorf("exportTo entry %q is not \".\", \"*\", \"~\" or a namespace", e)
		}
	}
	if len(exportTo) > 1 && (seen["*"] || seen["~"]) {
		return fmt.Errorf(`exportTo [%s]: "*" (everyone) or "~" (no one) must be its only entry`, strings.Join(exportTo, ", "))
	}
	return nil
}
