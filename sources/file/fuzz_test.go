package file

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/xdsbridge/xdsbridge/settings"
)

// FuzzParse feeds arbitrary services documents to Schema.Parse in each
// format (schema picks one of the schemas below): it must never panic, and
// what it accepts must keep the model's promises (named, unique services;
// endpoints in canonical order, unique in their service). A Prometheus
// document's endpoints must also be servable, since its bad targets are
// dropped rather than rejected, and each dropped target must be a
// *settings.KeyError naming it. The xdsbridge format must read a document
// exactly as Parse does. In CI:
//
//	go test -run='^$' -fuzz='^FuzzParse$' -fuzztime=10s ./sources/file/
func FuzzParse(f *testing.F) {
	schemas := []Schema{
		{},
		{Format: FormatXDSBridge},
		{Format: FormatPrometheus},
		{Format: FormatPrometheus, ServiceLabel: "__meta_service", DefaultService: "other"},
	}
	for _, seed := range []struct {
		data   string
		isJSON bool
		schema uint8
	}{
		{"services:\n  - name: web\n    endpoints:\n      - {address: 10.0.0.1, port: 8080, weight: 3, priority: 1, health: draining}\n", false, 0},
		{"services:\n  - name: a\n    endpoints: [{address: '::1', port: 1, locality: {region: r, zone: z, sub_zone: s}, metadata: {k: v}}]\n", false, 1},
		{`{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 80}]}]}`, true, 0},
		{"services: []\n", false, 0},
		{"services:\n  - &x {name: a}\n  - *x\n", false, 0},
		{"services:\n  - name: a\n    endpoints:\n      - address: 0.0.0.0\n        port: 80\n", false, 1},
		{"services:\n  - name: web\n    endpoints:\n      - address: 10.0.0.1\n        port: 80", false, 0},
		{fileSDYAML, false, 0},
		{fileSDJSON, true, 2},
		{"- targets: ['10.0.0.1:80', 'db:5432', '10.0.0.1:80', '[::1]:0']\n  labels: {__meta_service: a, job: b}\n- targets: ['10.0.0.2:80']\n", false, 3},
		{`[{"targets": ["10.0.0.1:80"], "labels": {"job": ""}}, {"targets": []}]`, true, 2},
		{"- &g {targets: ['10.0.0.1:80'], labels: {job: a}}\n- *g\n", false, 0},
	} {
		f.Add([]byte(seed.data), seed.isJSON, seed.schema)
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool, schema uint8) {
		sc := schemas[int(schema)%len(schemas)]
		doc, err := sc.Parse(data, isJSON)
		if sc.Format == FormatXDSBridge {
			svcs, perr := Parse(data, isJSON)
			if (err == nil) != (perr == nil) || err == nil && len(svcs) != len(doc.Services) {
				t.Fatalf("the xdsbridge format read %d services (error %v), Parse %d (error %v)", len(doc.Services), err, len(svcs), perr)
			}
		}
		if err != nil {
			return
		}
		prometheus := doc.Format == FormatPrometheus
		for _, err := range doc.Dropped {
			var ke *settings.KeyError
			if !errors.As(err, &ke) || ke.Key == "" {
				t.Fatalf("dropped target error %v names no key", err)
			}
			// The xdsbridge format leaves out only what is well formed
			// but cannot be served.
			if !prometheus && !errors.Is(err, errUnservable) {
				t.Fatalf("the %s format dropped %v", doc.Format, err)
			}
		}
		seen := map[string]bool{}
		for _, s := range doc.Services {
			if s.Name == "" || seen[s.Name] {
				t.Fatalf("service name %q empty or repeated", s.Name)
			}
			seen[s.Name] = true
			where := map[netip.AddrPort]bool{}
			for i, e := range s.Endpoints {
				if e.Port == 0 || e.Port > 65535 || e.Weight == 0 {
					t.Fatalf("service %s: endpoint %+v accepted", s.Name, e)
				}
				if err := e.Validate(); prometheus && err != nil {
					t.Fatalf("service %s: target %+v served: %v", s.Name, e, err)
				}
				if i > 0 && s.Endpoints[i-1].Compare(e) > 0 {
					t.Fatalf("service %s: endpoints not in canonical order", s.Name)
				}
				ap := netip.AddrPortFrom(netip.MustParseAddr(e.Address), uint16(e.Port))
				if where[ap] {
					t.Fatalf("service %s: endpoint %s repeated", s.Name, ap)
				}
				where[ap] = true
			}
		}
	})
}
