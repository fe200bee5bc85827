package sources

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCheckUpstream(t *testing.T) {
	for _, tt := range []struct {
		addr string
		bad  string
	}{
		{"10.0.0.1", ""}, {"2001:db8::1", ""}, {"::1", ""}, {"127.0.0.1", ""}, {"fe80::1", ""},
		{"0.0.0.0", "unspecified"}, {"::", "unspecified"}, {"224.0.0.1", "multicast"}, {"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"}, {"fe80::1%eth0", "scoped"},
	} {
		err := CheckUpstream(netip.MustParseAddr(tt.addr))
		if (err == nil) != (tt.bad == "") || (err != nil && !strings.Contains(err.Error(), tt.bad)) {
			t.Errorf("CheckUpstream(%s) = %v, want %q", tt.addr, err, tt.bad)
		}
	}
}
