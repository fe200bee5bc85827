package dns

import (
	"net"
	"strings"

	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/settings"
)

// Transports of Config.Transport.
const (
	// TransportAuto uses TCP where UDP is known to lose records silently
	// (Consul's DNS interface: a name under .consul, or a server on
	// Consul's DNS port 8600), and UDP elsewhere.
	TransportAuto = "auto"
	// TransportUDP queries over UDP and repeats a truncated answer over
	// TCP (RFC 7766).
	TransportUDP = "udp"
	// TransportTCP queries over TCP only.
	TransportTCP = "tcp"
)

// consulDNSPort is the port Consul's DNS interface listens on by default.
const consulDNSPort = "8600"

// Consul's DNS interface trims a UDP answer to the EDNS size without
// setting TC unless dns_config.enable_truncate is on, so a service with
// more instances than fit (40 to 60) comes back as a random subset,
// reshuffled at each refresh, with nothing to say so. Over TCP it answers
// in full.

func (c *Config) checkTransport() error {
	switch c.Transport {
	case TransportAuto, TransportUDP, TransportTCP:
	default:
		return settings.Errorf("transport", "%q is not one of auto, udp, tcp", c.Transport)
	}
	if c.EDNSBuffer < 512 || c.EDNSBuffer > 65535 {
		return settings.Errorf("edns_buffer_size", "%d is outside 512..65535", c.EDNSBuffer)
	}
	if c.Attempts < 1 || c.Attempts > 10 {
		return settings.Errorf("attempts", "%d is outside 1..10", c.Attempts)
	}
	return nil
}

// overTCP reports whether a query for name to srv goes over TCP at once.
func (r *resolver) overTCP(name, srv string) bool {
	switch r.transport {
	case TransportTCP:
		return true
	case TransportUDP:
		return false
	}
	if _, port, err := net.SplitHostPort(srv); err == nil && port == consulDNSPort {
		return true
	}
	n := mdns.CanonicalName(name)
	return n == "consul." || strings.HasSuffix(n, ".consul.")
}
