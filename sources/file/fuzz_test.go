package file

import (
	"testing"
)

// FuzzParse feeds arbitrary services files to Parse: it must never panic,
// and what it accepts must keep the model's promises (named, unique
// services; valid endpoints in canonical order). In CI:
//
//	go test -run='^$' -fuzz='^FuzzParse$' -fuzztime=10s ./sources/file/
func FuzzParse(f *testing.F) {
	for _, seed := range []struct {
		data   string
		isJSON bool
	}{
		{"services:\n  - name: web\n    endpoints:\n      - {address: 10.0.0.1, port: 8080, weight: 3, priority: 1, health: draining}\n", false},
		{"services:\n  - name: a\n    endpoints: [{address: '::1', port: 1, locality: {region: r, zone: z, sub_zone: s}, metadata: {k: v}}]\n", false},
		{`{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 80}]}]}`, true},
		{"services: []\n", false},
		{"services:\n  - &x {name: a}\n  - *x\n", false},
		{"services:\n  - name: a\n    endpoints:\n      - address: 0.0.0.0\n        port: 80\n", false},
		{"services:\n  - name: web\n    endpoints:\n      - address: 10.0.0.1\n        port: 80", false},
	} {
		f.Add([]byte(seed.data), seed.isJSON)
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		svcs, err := Parse(data, isJSON)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range svcs {
			if s.Name == "" || seen[s.Name] {
				t.Fatalf("service name %q empty or repeated", s.Name)
			}
			seen[s.Name] = true
			for i, e := range s.Endpoints {
				if e.Port == 0 || e.Port > 65535 || e.Weight == 0 {
					t.Fatalf("service %s: endpoint %+v accepted", s.Name, e)
				}
				if i > 0 && s.Endpoints[i-1].Compare(e) > 0 {
					t.Fatalf("service %s: endpoints not in canonical order", s.Name)
				}
			}
		}
	})
}
