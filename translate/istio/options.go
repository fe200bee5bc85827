package istio

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"

	keys "github.com/xdsbridge/xdsbridge/settings" // named keys: this package has a type settings
	"github.com/xdsbridge/xdsbridge/sources"
)

// Shape is how a service's endpoints reach istiod.
type Shape string

const (
	// ShapeInline puts the endpoints inside the ServiceEntry: one resource
	// per service, re-sent whole when any of its endpoints changes.
	ShapeInline Shape = "inline"
	// ShapeWorkloadEntries makes one WorkloadEntry per endpoint, which the
	// ServiceEntry selects by a label (workloadSelector).
	ShapeWorkloadEntries Shape = "workload_entries"
)

// The defaults of Options' fields; the configuration's defaults are these.
const (
	DefaultShape = ShapeInline
	// DefaultHost is the name Consul's DNS interface gives a service, the
	// one its users already call it by.
	DefaultHost = "{service}.service.consul"
	// DefaultProtocolKey is the instance metadata key (service meta in
	// Consul) that declares the protocol, as Istio's former Consul
	// registry and the MCP servers that replaced it read it; a tag
	// "protocol=http" declares it too.
	DefaultProtocolKey = "protocol"
	// DefaultProtocol is the protocol of a service that declares none: TCP
	// works for every protocol, where Istio's sniffing (an empty protocol)
	// stalls server-first protocols such as MySQL.
	DefaultProtocol = "TCP"
	DefaultLocation = "MESH_INTERNAL"
	// DefaultPort is the service port of a service whose instances each
	// listen on a port of their own (see Options.DefaultPort): the
	// conventional HTTP port, which needs no configuration to call.
	DefaultPort = 80
	// DefaultNamespace is the namespace of the resources unless a rule
	// says otherwise: one namespace for everything the bridge serves makes
	// it easy to import (Sidecar egress "xdsbridge/*") or to find.
	DefaultNamespace = "xdsbridge"
)

// SelectorLabel is the label by which a ServiceEntry of the WorkloadEntry
// shape selects its WorkloadEntries; its value is the ServiceEntry's name.
// An instance label of that key is replaced.
const SelectorLabel = "xdsbridge/service"

// Options configure a Translator. Empty fields take the defaults above.
type Options struct {
	Shape Shape
	// Host is the template of each service's host: {service} stands for
	// the service name and {source} for its source's name, both in lower
	// case. It must contain {service}.
	Host string
	// ProtocolKey is the metadata key, or the key of a "key=value" tag,
	// that declares an instance's protocol.
	ProtocolKey string
	// DefaultProtocol is the protocol of services whose instances declare
	// none; any protocol of Istio's service ports, in any case.
	DefaultProtocol string
	// DefaultPort is the service port's number of services whose
	// instances each listen on a port of their own (no two on one port),
	// unless a rule sets one; other services take the port most of their
	// instances listen on.
	DefaultPort uint16
	// Location is MESH_INTERNAL or MESH_EXTERNAL.
	Location  string
	Namespace string
	// ExportTo is the entries' exportTo; empty leaves it to the mesh's
	// defaultServiceExportTo.
	ExportTo []string
	// Rules refine the settings above per service.
	Rules []Rule
}

// Rule sets the namespace, exportTo, location or port of the services it
// matches. Rules apply in order, a later match overriding what an earlier
// one set; empty fields set nothing.
type Rule struct {
	// Match selects services as the cluster shaping rules do.
	Match     sources.Selector `mapstructure:"match"`
	Namespace string           `mapstructure:"namespace"`
	ExportTo  []string         `mapstructure:"export_to"`
	Location  string           `mapstructure:"location"`
	// Port is the service port's number; 0 leaves it to the instances
	// (the port most of them listen on, or Options.DefaultPort when each
	// has a port of its own). Its type bounds it, so decoding refuses a
	// number no port can have.
	Port uint16 `mapstructure:"port"`
}

// Translator builds the Istio resources of services with fixed options.
// It is immutable and safe for concurrent use.
type Translator struct {
	shape       Shape
	host        string
	protocolKey string
	protocol    string
	defaultPort uint32
	settings    settings
	rules       []rule
}

// settings are what rules decide per service.
type settings struct {
	namespace string
	exportTo  []string
	location  networkingv1alpha3.ServiceEntry_Location
	port      uint32
}

type rule struct {
	match sources.Selector
	settings
	hasLocation bool
}

// placeholder matches the {name} parts of a host template.
var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// New checks opts and builds a Translator. Its errors are *settings.KeyError
// values keyed like the configuration section (host, rules[1].namespace).
func New(opts Options) (*Translator, error) {
	t := &Translator{
		shape:       Shape(or(string(opts.Shape), string(DefaultShape))),
		host:        or(opts.Host, DefaultHost),
		protocolKey: or(opts.ProtocolKey, DefaultProtocolKey),
		defaultPort: uint32(cmp.Or(opts.DefaultPort, DefaultPort)),
	}
	if t.shape != ShapeInline && t.shape != ShapeWorkloadEntries {
		return nil, keys.Errorf("shape", "unknown shape %q (want %s or %s)", t.shape, ShapeInline, ShapeWorkloadEntries)
	}
	if err := checkTemplate(t.host); err != nil {
		return nil, keys.Prefix("host", err)
	}
	var ok bool
	if t.protocol, ok = parseProtocol(or(opts.DefaultProtocol, DefaultProtocol)); !ok {
		return nil, keys.Errorf("default_protocol", "unsupported protocol %q (want one of %s)",
			opts.DefaultProtocol, strings.Join(protocols, ", "))
	}
	loc, err := parseLocation(or(opts.Location, DefaultLocation))
	if err != nil {
		return nil, keys.Prefix("location", err)
	}
	t.settings = settings{namespace: or(opts.Namespace, DefaultNamespace), exportTo: opts.ExportTo, location: loc}
	if err := checkSettings(t.settings); err != nil {
		return nil, err
	}
	if err := t.checkShapeLocation("location", loc); err != nil {
		return nil, err
	}
	for i, r := range opts.Rules {
		key := fmt.Sprintf("rules[%d]", i)
		built, err := newRule(r, t.settings)
		if err != nil {
			return nil, keys.Prefix(key, err)
		}
		if built.hasLocation {
			if err := t.checkShapeLocation(key+".location", built.location); err != nil {
				return nil, err
			}
		}
		t.rules = append(t.rules, built)
	}
	return t, nil
}

// checkShapeLocation refuses MESH_EXTERNAL in the WorkloadEntry shape:
// Istio applies a workload selector to MESH_INTERNAL entries only.
func (t *Translator) checkShapeLocation(key string, loc networkingv1alpha3.ServiceEntry_Location) error {
	if t.shape == ShapeWorkloadEntries && loc != networkingv1alpha3.ServiceEntry_MESH_INTERNAL {
		return keys.Errorf(key, "%s needs shape %s: Istio selects WorkloadEntries for MESH_INTERNAL entries only", loc, ShapeInline)
	}
	return nil
}

func newRule(r Rule, base settings) (rule, error) {
	if err := r.Match.Validate(); err != nil {
		return rule{}, keys.Prefix("match", err)
	}
	built := rule{match: r.Match, settings: settings{namespace: r.Namespace, exportTo: r.ExportTo, port: uint32(r.Port)}}
	if r.Location != "" {
		loc, err := parseLocation(r.Location)
		if err != nil {
			return rule{}, keys.Prefix("location", err)
		}
		built.location, built.hasLocation = loc, true
	}
	// Checked against the section's namespace where the rule sets none:
	// the combination with other rules is checked per service, when the
	// resource is validated.
	check := built.settings
	check.namespace = or(check.namespace, base.namespace)
	return built, checkSettings(check)
}

// checkSettings checks a namespace and an exportTo list.
func checkSettings(s settings) error {
	if !isDNSLabel(s.namespace) {
		return keys.Errorf("namespace", "%q is not a DNS-1123 label (lowercase letters, digits and '-', at most 63)", s.namespace)
	}
	if err := checkExportTo(s.namespace, s.exportTo); err != nil {
		return keys.Prefix("export_to", err)
	}
	return nil
}

// resolve returns the settings of svc: the section's, overridden by every
// matching rule in order.
func (t *Translator) resolve(svc sources.Service) settings {
	s := t.settings
	for _, r := range t.rules {
		if !r.match.MatchService(svc) {
			continue
		}
		if r.namespace != "" {
			s.namespace = r.namespace
		}
		if len(r.exportTo) > 0 {
			s.exportTo = r.exportTo
		}
		if r.hasLocation {
			s.location = r.location
		}
		if r.port != 0 {
			s.port = r.port
		}
	}
	return s
}

// render returns the host of svc.
func (t *Translator) render(svc sources.Service) string {
	return strings.NewReplacer("{service}", strings.ToLower(svc.Name), "{source}", strings.ToLower(svc.Source)).Replace(t.host)
}

// checkTemplate checks a host template: {service} present, no other
// placeholder than {source}, and a valid host for a sample service.
func checkTemplate(tmpl string) error {
	if !strings.Contains(tmpl, "{service}") {
		return fmt.Errorf("%q must contain {service}: every service needs a host of its own", tmpl)
	}
	for _, p := range placeholder.FindAllString(tmpl, -1) {
		if p != "{service}" && p != "{source}" {
			return fmt.Errorf("%q: unknown placeholder %s (known: {service}, {source})", tmpl, p)
		}
	}
	sample := strings.NewReplacer("{service}", "web", "{source}", "consul").Replace(tmpl)
	if err := checkHost(sample); err != nil {
		return fmt.Errorf("%q does not make a valid host: %w", tmpl, err)
	}
	return nil
}

func parseLocation(s string) (networkingv1alpha3.ServiceEntry_Location, error) {
	switch strings.ToUpper(s) {
	case "MESH_INTERNAL":
		return networkingv1alpha3.ServiceEntry_MESH_INTERNAL, nil
	case "MESH_EXTERNAL":
		return networkingv1alpha3.ServiceEntry_MESH_EXTERNAL, nil
	}
	return 0, fmt.Errorf("unknown location %q (want MESH_INTERNAL or MESH_EXTERNAL)", s)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
