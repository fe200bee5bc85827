package file

import (
	"fmt"
	"maps"
	"net/netip"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/sources"
)

// targetGroups reads the list n of Prometheus target groups, the document
// of file_sd (JSON or YAML) and http_sd (JSON), as Prometheus documents it
// (https://prometheus.io/docs/prometheus/latest/configuration/configuration/#file_sd_config):
//
//	# a target group per item
//	- targets: ["10.0.0.1:8080", "10.0.0.2:8080"]   # host:port
//	  labels: {job: web, env: prod}                  # optional
//
// The value of the schema's service label names each group's service
// (DefaultService where a group lacks it); groups of one name make one
// service. Every other label becomes metadata of the group's endpoints.
// Endpoints get weight 1, priority 0 and are healthy: Prometheus targets
// carry nothing more.
//
// The document's shape is checked as Prometheus checks it, and any fault
// rejects the whole document with the field's path: a group that is not a
// mapping, a key other than targets and labels, a target or label value
// that is not a string. Targets, though, are registry data and are
// dropped one by one (Document.Dropped), the rest served: one that is not
// IP:port (a host name, no port; Envoy's EDS takes IP addresses only), one
// that cannot be an upstream (sources.Endpoint.Validate), one repeated in
// its service (the first is kept), and those of a group without the
// service label when DefaultService is empty. A group with the label and
// no targets makes a service with no endpoints, as `[]` makes no service.
func (sc Schema) targetGroups(n *yaml.Node) (Document, error) {
	doc := Document{Format: FormatPrometheus}
	label := sc.label()
	index := map[string]int{}                       // service name -> place in doc.Services
	where := map[string]map[netip.AddrPort]string{} // per service, each target's first record
	for i, g := range n.Content {
		gpath := fmt.Sprintf("[%d]", i)
		var targets []*yaml.Node
		labels := map[string]string{}
		err := fields(gpath, g, []string{"targets", "labels"}, func(key string, v *yaml.Node) (err error) {
			if key == "targets" {
				targets, err = list(gpath+".targets", v)
				return err
			}
			return labelSet(gpath+".labels", v, labels)
		})
		if err != nil {
			return Document{}, err
		}
		name := labels[label]
		delete(labels, label)
		if name == "" {
			name = sc.DefaultService
		}
		if name != "" {
			if _, ok := index[name]; !ok {
				index[name] = len(doc.Services)
				doc.Services = append(doc.Services, sources.Service{Name: name, Endpoints: []sources.Endpoint{}})
				where[name] = map[netip.AddrPort]string{}
			}
		}
		for j, t := range targets {
			tpath := fmt.Sprintf("%s.targets[%d]", gpath, j)
			host, err := text(tpath, t)
			if err != nil {
				return Document{}, err
			}
			if name == "" {
				doc.Dropped = append(doc.Dropped, fail(tpath, t, "its group has no %q label and default_service is not set", label))
				continue
			}
			ap, err := netip.ParseAddrPort(host)
			if err != nil {
				doc.Dropped = append(doc.Dropped, fail(tpath, t, "%q is not IP:port", host))
				continue
			}
			e := sources.Endpoint{Address: ap.Addr().String(), Port: uint32(ap.Port()), Weight: 1,
				Health: sources.HealthHealthy, Origin: sources.Origin{Record: tpath}}
			if len(labels) > 0 {
				e.Metadata = maps.Clone(labels)
			}
			if err := e.Validate(); err != nil {
				doc.Dropped = append(doc.Dropped, fail(tpath, t, "%v", err))
				continue
			}
			if first, dup := where[name][ap]; dup {
				doc.Dropped = append(doc.Dropped, fail(tpath, t, "%s repeats %s of service %q", host, first, name))
				continue
			}
			where[name][ap] = tpath
			s := &doc.Services[index[name]]
			s.Endpoints = append(s.Endpoints, e)
		}
	}
	for i := range doc.Services {
		doc.Services[i].Sort()
	}
	return doc, nil
}

// labelSet adds the labels of the mapping n to into. A label's name must
// not be empty nor repeated, and its value must be a string (a YAML number
// or boolean is taken as written).
func labelSet(path string, n *yaml.Node, into map[string]string) error {
	return stringMap(path, n, func(k *yaml.Node, v string) error {
		if k.Value == "" {
			return fail(path, k, "a label name is empty")
		}
		if _, dup := into[k.Value]; dup {
			return fail(join(path, k.Value), k, "duplicate label")
		}
		into[k.Value] = v
		return nil
	})
}
