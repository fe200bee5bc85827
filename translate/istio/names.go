package istio

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// maxLabel is the longest DNS label, Kubernetes label name and label value.
const maxLabel = 63

// hashSuffix is the length of the hexadecimal hash appended to a name that
// had to be changed, so that two service names that sanitise alike (Web and
// web, a_b and a-b) still get different resource names.
const hashSuffix = 8

// resourceName returns the name of a service's ServiceEntry: the service
// name itself when it is already a DNS-1123 label (lowercase letters,
// digits and '-', at most 63 characters), otherwise its lowercased and
// sanitised form followed by a hash of the original name. The result is a
// DNS-1123 label, and so also a valid label value: the WorkloadEntry shape
// selects a service's WorkloadEntries by it.
func resourceName(service string) string {
	if isDNSLabel(service) {
		return service
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(service) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.TrimRight(b.String(), "-")
	if len(base) > maxLabel-hashSuffix-1 {
		base = strings.TrimRight(base[:maxLabel-hashSuffix-1], "-")
	}
	sum := strconv.FormatUint(xxhash.Sum64String(service), 16)
	sum = strings.Repeat("0", 16-len(sum)) + sum
	if base == "" {
		return "s-" + sum[:hashSuffix]
	}
	return base + "-" + sum[:hashSuffix]
}

// workloadName returns the name of the WorkloadEntry of one endpoint of
// the service whose ServiceEntry is se: se, the address and the port, so
// that the same instance keeps the same name across restarts and replicas
// and two instances never share one. IPv4 addresses read as they are
// written (dots become dashes); IPv6 addresses are written as 32
// hexadecimal digits, which no IPv4 form can produce.
func workloadName(se string, addr netip.Addr, port uint32) string {
	var a string
	if addr.Is4() {
		a = strings.ReplaceAll(addr.String(), ".", "-")
	} else {
		b := addr.As16()
		const hex = "0123456789abcdef"
		buf := make([]byte, 0, 32)
		for _, x := range b {
			buf = append(buf, hex[x>>4], hex[x&15])
		}
		a = string(buf)
	}
	return se + "-" + a + "-" + strconv.FormatUint(uint64(port), 10)
}

// labelValue maps s onto the syntax of a Kubernetes label value: at most 63
// characters of letters, digits, '-', '_' and '.', beginning and ending
// with a letter or digit (or empty). Other characters become '_'; what
// cannot begin or end a value is trimmed.
func labelValue(s string) string {
	if isLabelValue(s) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !isNameChar(c) {
			b[i] = '_'
		}
	}
	v := trimName(string(b))
	if len(v) > maxLabel {
		v = trimName(v[:maxLabel])
	}
	return v
}

// labelKey maps s onto the syntax of a Kubernetes label key: a key that is
// valid as it is ([prefix/]name) is kept; any other becomes a name alone,
// as labelValue, without a prefix. An empty result means no key can be
// made of s.
func labelKey(s string) string {
	if isLabelKey(s) {
		return s
	}
	return labelValue(s)
}

func isNameChar(c byte) bool {
	return isAlnum(c) || c == '-' || c == '_' || c == '.'
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// trimName drops the characters a label name or value may not begin or
// end with.
func trimName(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r > 0x7f || !isAlnum(byte(r)) })
}

// isLabelValue reports whether s is a valid Kubernetes label value.
func isLabelValue(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > maxLabel || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return false
		}
	}
	return true
}

// isLabelKey reports whether s is a valid Kubernetes label key: an
// optional prefix, a DNS subdomain of at most 253 characters followed by
// '/', and a non-empty name with the syntax of a label value.
func isLabelKey(s string) bool {
	prefix, name, found := strings.Cut(s, "/")
	if !found {
		name = prefix
	} else if !isDNSSubdomain(prefix) {
		return false
	}
	return name != "" && isLabelValue(name)
}

// isDNSLabel reports whether s is a DNS-1123 label: 1 to 63 lowercase
// letters, digits and '-', beginning and ending with a letter or digit.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > maxLabel || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is a DNS-1123 subdomain: at most 253
// characters of dot-separated DNS-1123 labels (Kubernetes object names).
func isDNSSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if !isDNSLabel(l) {
			return false
		}
	}
	return true
}
