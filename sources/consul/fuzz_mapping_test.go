package consul

import (
	"encoding/json"
	"testing"

	"github.com/hashicorp/consul/api"
)

// FuzzMapping feeds arbitrary /v1/health/service JSON to the mapping of
// health entries to endpoints: it must never panic, and every endpoint it
// returns must be servable (Endpoint.Validate), weighted at least 1, in
// canonical order, with no more endpoints plus drops than entries. In CI:
//
//	go test -run='^$' -fuzz='^FuzzMapping$' -fuzztime=10s ./sources/consul/
func FuzzMapping(f *testing.F) {
	for _, seed := range []string{
		`[{"Node":{"Node":"n1","Address":"10.0.0.1","Datacenter":"dc1","Meta":{"zone":"z1"}},` +
			`"Service":{"ID":"web-1","Service":"web","Address":"","Port":8080,"Tags":["b","a","a"],"Meta":{"v":"1"},"Weights":{"Passing":3,"Warning":1}},` +
			`"Checks":[{"Status":"passing"},{"Status":"warning","ServiceID":"web-1"}]}]`,
		`[{"Node":{"Address":"node.example"},"Service":{"Address":"fe80::1%eth0","Port":70000,"Weights":{"Passing":-5}},"Checks":[{"Status":"critical"}]}]`,
		`[{"Node":{"Address":"0.0.0.0"},"Service":{"Port":0},"Checks":[{"CheckID":"_node_maintenance","Status":"critical"}]},null,{}]`,
		`[{"Node":{"Address":"::ffff:10.0.0.1","TaggedAddresses":{"wan":"10.9.9.9"}},"Service":{"Address":"::0001","Port":1,"Weights":{"Passing":4294967297}}}]`,
	} {
		f.Add([]byte(seed), uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, opts uint8) {
		var entries []*api.ServiceEntry
		if json.Unmarshal(data, &entries) != nil {
			return
		}
		m := mapping{
			addressSource:   []string{AddressService, AddressNode}[opts%2],
			warningDegraded: opts&2 != 0,
			keepMesh:        opts&8 != 0,
			criticalDrop:    opts&4 != 0,
			locality:        LocalityConfig{ZoneKey: "zone"},
			datacenter:      "dc1",
			priority:        uint32(opts >> 4),
		}
		eps, dropped, hostnames := m.endpoints(entries)
		if len(eps)+dropped > len(entries) || dropped < 0 || hostnames > dropped {
			t.Fatalf("%d endpoints and %d dropped from %d entries", len(eps), dropped, len(entries))
		}
		for i, e := range eps {
			if err := e.Validate(); err != nil {
				t.Fatalf("endpoint %+v returned: %v", e, err)
			}
			if e.Weight == 0 {
				t.Fatalf("endpoint %+v has weight 0", e)
			}
			if i > 0 && eps[i-1].Compare(e) > 0 {
				t.Fatal("endpoints not in canonical order")
			}
		}
	})
}
