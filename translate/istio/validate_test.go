package istio

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
)

// validEntry is a ServiceEntry that passes every check; each case below
// breaks one rule of it.
func validEntry() *networkingv1alpha3.ServiceEntry {
	return &networkingv1alpha3.ServiceEntry{
		Hosts:      []string{"web.service.consul"},
		Ports:      []*networkingv1alpha3.ServicePort{{Number: 80, Protocol: "HTTP", Name: "http"}},
		Location:   networkingv1alpha3.ServiceEntry_MESH_INTERNAL,
		Resolution: networkingv1alpha3.ServiceEntry_STATIC,
		Endpoints: []*networkingv1alpha3.WorkloadEntry{
			{Address: "10.0.0.1", Ports: map[string]uint32{"http": 8080}, Labels: map[string]string{"version": "v1"}, Locality: "eu/eu-1a/r1", Weight: 3},
			{Address: "2001:db8::1", Ports: map[string]uint32{"http": 8080}},
		},
		ExportTo: []string{".", "shop"},
	}
}

func TestCheckServiceEntry(t *testing.T) {
	cases := []struct {
		name   string
		ns     string
		object string
		change func(se *networkingv1alpha3.ServiceEntry)
		want   string // a part of the error; empty: valid
	}{
		{name: "valid", change: func(*networkingv1alpha3.ServiceEntry) {}},
		{name: "valid with selector", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints = nil
			se.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: map[string]string{SelectorLabel: "web"}}
		}},
		{name: "valid trailing dot and upper case", change: func(se *networkingv1alpha3.ServiceEntry) { se.Hosts = []string{"Web.Service.Consul."} }},
		{name: "valid no endpoints", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints = nil }},
		{name: "namespace", ns: "Not_A_Label", want: "namespace"},
		{name: "object name", object: "web_1", want: "DNS-1123 subdomain"},
		{name: "no host", change: func(se *networkingv1alpha3.ServiceEntry) { se.Hosts = nil }, want: "at least one host"},
		{name: "empty host", change: func(se *networkingv1alpha3.ServiceEntry) { se.Hosts = []string{""} }, want: "1 to 255"},
		{name: "host too long", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Hosts = []string{strings.Repeat("a.", 128) + "consul"}
		}, want: "1 to 255"},
		{name: "wildcard host", change: func(se *networkingv1alpha3.ServiceEntry) { se.Hosts = []string{"*.service.consul"} }, want: "wildcard"},
		{name: "numeric top-level domain", change: func(se *networkingv1alpha3.ServiceEntry) { se.Hosts = []string{"web.1"} }, want: "all digits"},
		{name: "host label syntax", change: func(se *networkingv1alpha3.ServiceEntry) { se.Hosts = []string{"web_api.service.consul"} }, want: `label "web_api"`},
		{name: "host label length", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Hosts = []string{strings.Repeat("a", 64) + ".consul"}
		}, want: "is not a DNS-1123 label"},
		{name: "resolution", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Resolution = networkingv1alpha3.ServiceEntry_DNS
		}, want: "only STATIC"},
		{name: "location", change: func(se *networkingv1alpha3.ServiceEntry) { se.Location = 7 }, want: "unknown location"},
		{name: "null port", change: func(se *networkingv1alpha3.ServiceEntry) { se.Ports = append(se.Ports, nil) }, want: "ports[1] is null"},
		{name: "port name twice", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Ports = append(se.Ports, &networkingv1alpha3.ServicePort{Number: 81, Protocol: "HTTP", Name: "http"})
		}, want: `port name "http" is defined twice`},
		{name: "port number twice", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Ports = append(se.Ports, &networkingv1alpha3.ServicePort{Number: 80, Protocol: "TCP", Name: "tcp"})
		}, want: "port 80 is defined twice"},
		{name: "port name syntax", change: func(se *networkingv1alpha3.ServiceEntry) { se.Ports[0].Name = "HTTP_1" }, want: "not a DNS-1123 label"},
		{name: "unsupported protocol", change: func(se *networkingv1alpha3.ServiceEntry) { se.Ports[0].Protocol = "UDP" }, want: "unsupported protocol"},
		{name: "port number zero", change: func(se *networkingv1alpha3.ServiceEntry) { se.Ports[0].Number = 0 }, want: "outside 1..65535"},
		{name: "port number too large", change: func(se *networkingv1alpha3.ServiceEntry) { se.Ports[0].Number = 65536 }, want: "outside 1..65535"},
		{name: "target port", change: func(se *networkingv1alpha3.ServiceEntry) { se.Ports[0].TargetPort = 70000 }, want: "target port"},
		{name: "several hosts on TCP", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Hosts = append(se.Hosts, "web.example.org")
			se.Ports[0].Protocol = "TCP"
		}, want: "several hosts"},
		{name: "selector outside the mesh", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints = nil
			se.Location = networkingv1alpha3.ServiceEntry_MESH_EXTERNAL
			se.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: map[string]string{SelectorLabel: "web"}}
		}, want: "MESH_INTERNAL entries only"},
		{name: "selector and endpoints", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: map[string]string{"a": "b"}}
		}, want: "not both"},
		{name: "empty selector", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints = nil
			se.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{}
		}, want: "no labels"},
		{name: "wildcard selector", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints = nil
			se.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: map[string]string{"app": "web*"}}
		}, want: "wildcards"},
		{name: "selector label syntax", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints = nil
			se.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: map[string]string{"": "web"}}
		}, want: "label key"},
		{name: "null endpoint", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[1] = nil }, want: "endpoints[1] is null"},
		{name: "endpoint host name", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[0].Address = "web-1.node.consul" }, want: "not an IP address"},
		{name: "endpoint unix address", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[0].Address = "unix:///tmp/web.sock" }, want: "not an IP address"},
		{name: "endpoint zone", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[1].Address = "fe80::1%eth0" }, want: "not an IP address"},
		{name: "endpoint port name", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints[0].Ports = map[string]uint32{"grpc": 8080}
		}, want: `port "grpc" is not a port of the service entry`},
		{name: "endpoint port number", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[0].Ports["http"] = 0 }, want: "outside 1..65535"},
		{name: "label key", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[0].Labels["node:rack"] = "r1" }, want: `label key "node:rack"`},
		{name: "label key prefix", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[0].Labels["Example.com/x"] = "r1" }, want: "label key"},
		{name: "label name length", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints[0].Labels[strings.Repeat("k", 64)] = "v"
		}, want: "label key"},
		{name: "label value", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[0].Labels["tags"] = "a,b" }, want: `value "a,b"`},
		{name: "label value length", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints[0].Labels["commit"] = strings.Repeat("f", 64)
		}, want: "label commit"},
		{name: "locality parts", change: func(se *networkingv1alpha3.ServiceEntry) { se.Endpoints[0].Locality = "eu/eu-1a/r1/extra" }, want: "region/zone/subzone"},
		{name: "weight sum", change: func(se *networkingv1alpha3.ServiceEntry) {
			se.Endpoints[0].Weight = 1 << 31
			se.Endpoints[1].Weight = 1 << 31
		}, want: "weights sum"},
		{name: "exportTo twice", change: func(se *networkingv1alpha3.ServiceEntry) { se.ExportTo = []string{"shop", "shop"} }, want: "twice"},
		{name: "exportTo dot and namespace", change: func(se *networkingv1alpha3.ServiceEntry) { se.ExportTo = []string{".", "xdsbridge"} }, want: "twice"},
		{name: "exportTo entry", change: func(se *networkingv1alpha3.ServiceEntry) { se.ExportTo = []string{"Shop"} }, want: "is not"},
		{name: "exportTo star and more", change: func(se *networkingv1alpha3.ServiceEntry) { se.ExportTo = []string{"*", "shop"} }, want: "only entry"},
		{name: "exportTo none and more", change: func(se *networkingv1alpha3.ServiceEntry) { se.ExportTo = []string{"~", "."} }, want: "only entry"},
		{name: "valid exportTo none", change: func(se *networkingv1alpha3.ServiceEntry) { se.ExportTo = []string{"~"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := validEntry()
			if tc.change != nil {
				tc.change(se)
			}
			ns, object := tc.ns, tc.object
			if ns == "" {
				ns = "xdsbridge"
			}
			if object == "" {
				object = "web"
			}
			wantError(t, checkServiceEntry(ns, object, se), tc.want)
		})
	}
}

func TestCheckWorkloadEntry(t *testing.T) {
	valid := &networkingv1alpha3.WorkloadEntry{
		Address: "10.0.0.1",
		Ports:   map[string]uint32{"http": 8080},
		Labels:  map[string]string{SelectorLabel: "web", "version": "v1"},
	}
	selector := map[string]string{SelectorLabel: "web"}
	ports := map[string]bool{"http": true}
	cases := []struct {
		name   string
		object string
		change func(we *networkingv1alpha3.WorkloadEntry)
		want   string
	}{
		{name: "valid", change: func(*networkingv1alpha3.WorkloadEntry) {}},
		{name: "name", object: "web-10.0.0.1:8080", want: "DNS-1123 subdomain"},
		{name: "selector label missing", change: func(we *networkingv1alpha3.WorkloadEntry) { delete(we.Labels, SelectorLabel) }, want: "selector"},
		{name: "selector label differs", change: func(we *networkingv1alpha3.WorkloadEntry) { we.Labels[SelectorLabel] = "api" }, want: "selector"},
		{name: "address", change: func(we *networkingv1alpha3.WorkloadEntry) { we.Address = "" }, want: "not an IP address"},
		{name: "port of another entry", change: func(we *networkingv1alpha3.WorkloadEntry) { we.Ports = map[string]uint32{"tcp": 1} }, want: "not a port"},
		{name: "labels", change: func(we *networkingv1alpha3.WorkloadEntry) { we.Labels["a b"] = "c" }, want: "label key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			we := proto.Clone(valid).(*networkingv1alpha3.WorkloadEntry)
			if tc.change != nil {
				tc.change(we)
			}
			object := tc.object
			if object == "" {
				object = "web-10-0-0-1-8080"
			}
			wantError(t, checkWorkloadEntry("xdsbridge", object, we, ports, selector), tc.want)
		})
	}
}

// wantError fails t unless err mentions want, or is nil when want is empty.
func wantError(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("valid input refused: %v", err)
	case want != "" && err == nil:
		t.Fatalf("accepted; want an error about %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not mention %q", err, want)
	}
}
