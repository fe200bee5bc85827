package bridge

import (
	"testing"

	"github.com/xdsbridge/xdsbridge/config"
)

func TestIdentityAllows(t *testing.T) {
	id := &identity{bindings: []config.Binding{
		{Peer: "spiffe://corp/ns/*/sa/*", NodeID: "$2.$1", NodeCluster: "$1-*"},
		{Peer: "ops.example.org", NodeID: "debug-*"},
	}}
	cases := []struct {
		name    string
		sans    []string
		node    string
		cluster string
		want    bool
	}{
		{"captures bind id and cluster", []string{"spiffe://corp/ns/shop/sa/web"}, "web.shop", "shop-eu", true},
		{"wrong id", []string{"spiffe://corp/ns/shop/sa/web"}, "api.shop", "shop-eu", false},
		{"wrong cluster", []string{"spiffe://corp/ns/shop/sa/web"}, "web.shop", "bank-eu", false},
		{"second SAN matches", []string{"other", "ops.example.org"}, "debug-1", "", true},
		{"empty cluster pattern matches any", []string{"ops.example.org"}, "debug-1", "whatever", true},
		{"no certificate", nil, "web.shop", "shop-eu", false},
		{"capture holding a star never widens", []string{"spiffe://corp/ns/*/sa/web"}, "web.*", "*-eu", false},
		{"literal peer must match whole", []string{"ops.example.org.evil"}, "debug-1", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := id.allows(c.sans, c.node, c.cluster); got != c.want {
				t.Errorf("allows(%v, %q, %q) = %t, want %t", c.sans, c.node, c.cluster, got, c.want)
			}
		})
	}
}
