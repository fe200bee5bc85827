package istio

import (
	"net/netip"
	"strings"
	"testing"
)

func TestResourceName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"web", "web"},
		{"web-2", "web-2"},
		{"Web", "web-"},
		{"web_api", "web-api-"},
		{"payments.v2", "payments-v2-"},
		{"__", "s-"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63)},
		{strings.Repeat("a", 64), strings.Repeat("a", 54) + "-"},
	} {
		got := resourceName(tc.in)
		if !strings.HasPrefix(got, tc.want) || (!strings.HasSuffix(tc.want, "-") && got != tc.want) {
			t.Errorf("resourceName(%q) = %q, want %q (plus a hash where it ends in -)", tc.in, got, tc.want)
		}
		if !isDNSLabel(got) {
			t.Errorf("resourceName(%q) = %q is not a DNS-1123 label", tc.in, got)
		}
	}
	// Names that sanitise alike stay apart, and a name keeps its result.
	seen := map[string]string{}
	for _, in := range []string{"Web", "WEB", "web_", "w-eb", "w_eb", "w.eb", strings.Repeat("x", 70), strings.Repeat("x", 71)} {
		got := resourceName(in)
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q both named %q", prev, in, got)
		}
		seen[got] = in
		if again := resourceName(in); again != got {
			t.Errorf("resourceName(%q) gave %q, then %q", in, got, again)
		}
	}
}

func TestWorkloadName(t *testing.T) {
	names := map[string]bool{}
	for _, a := range []string{"10.0.0.1", "10.0.0.10", "2001:db8::1", "::ffff:10.0.0.1", "::1"} {
		for _, port := range []uint32{1, 11, 65535} {
			n := workloadName("web", netip.MustParseAddr(a), port)
			if !isDNSSubdomain(n) {
				t.Errorf("%s:%d: %q is not a DNS-1123 subdomain", a, port, n)
			}
			if names[n] {
				t.Errorf("%s:%d: %q given twice", a, port, n)
			}
			names[n] = true
		}
	}
	if got := workloadName("web", netip.MustParseAddr("10.1.2.3"), 8080); got != "web-10-1-2-3-8080" {
		t.Errorf("IPv4 name %q, want web-10-1-2-3-8080", got)
	}
}

func TestLabelSyntax(t *testing.T) {
	for _, tc := range []struct{ in, key, value string }{
		{in: "version", key: "version", value: "version"},
		{in: "app.kubernetes.io/name", key: "app.kubernetes.io/name", value: "app.kubernetes.io_name"},
		{in: "node:rack", key: "node_rack", value: "node_rack"},
		{in: "a,b c", key: "a_b_c", value: "a_b_c"},
		{in: "-x-", key: "x", value: "x"},
		{in: "/", key: "", value: ""},
		{in: "Ünïcode", key: "n__code", value: "n__code"}, // byte by byte
		{in: "UPPER/lower", key: "UPPER_lower", value: "UPPER_lower"},
		{in: strings.Repeat("v", 70), key: strings.Repeat("v", 63), value: strings.Repeat("v", 63)},
	} {
		if got := labelKey(tc.in); got != tc.key {
			t.Errorf("labelKey(%q) = %q, want %q", tc.in, got, tc.key)
		}
		if got := labelValue(tc.in); got != tc.value {
			t.Errorf("labelValue(%q) = %q, want %q", tc.in, got, tc.value)
		}
	}
}
