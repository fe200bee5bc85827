package istio

import "strings"

// protocols are the protocols Istio supports on a service port, in Istio's
// own spelling (istio/istio pkg/config/protocol), which the ServicePort
// carries. UDP (which the proxies do not carry) and HTTP_PROXY (a sidecar
// egress listener's protocol, not a service's) are left out.
var protocols = []string{"GRPC", "GRPC-Web", "HTTP", "HTTP2", "HTTPS", "Mongo", "MySQL", "Redis", "TCP", "TLS"}

// parseProtocol returns Istio's spelling of a protocol name given in any
// case, and false when Istio does not support it on a service port.
func parseProtocol(s string) (string, bool) {
	for _, p := range protocols {
		if strings.EqualFold(s, p) {
			return p, true
		}
	}
	return "", false
}

// portName is the name of a service port: the protocol in lower case
// ("http", "grpc-web"), which follows Istio's naming convention
// (<protocol>[-<suffix>]) and is a DNS-1123 label.
func portName(protocol string) string { return strings.ToLower(protocol) }

// httpOrTLS reports whether Istio can tell several hosts apart on a port
// of that protocol: by the Host header (HTTP family) or the SNI (TLS).
func httpOrTLS(protocol string) bool {
	switch p, _ := parseProtocol(protocol); p {
	case "HTTP", "HTTP2", "GRPC", "GRPC-Web", "HTTPS", "TLS":
		return true
	}
	return false
}
