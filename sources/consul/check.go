package consul

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

var _ sources.Checker = (*Source)(nil)

// Check reports, for `bridge validate`, an address that does not parse and
// named files that cannot be read. Each is an error: the source would fail
// every read until the configuration is fixed.
func (s *Source) Check() []sources.Problem {
	var out []sources.Problem
	if err := checkAddress(s.cfg.Address, s.cfg.Scheme); err != nil {
		out = append(out, sources.Problem{Key: "address", Err: err})
	}
	for _, f := range []struct{ key, path string }{
		{"token_file", s.cfg.TokenFile},
		{"tls.ca_file", s.cfg.TLS.CAFile},
		{"tls.cert_file", s.cfg.TLS.CertFile},
		{"tls.key_file", s.cfg.TLS.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if err := sources.Readable(f.path); err != nil {
			out = append(out, sources.Problem{Key: f.key, Err: err})
		}
	}
	return out
}

// checkAddress accepts what the Consul API client accepts: host:port, or a
// URL with a scheme (http, https, or unix with a socket path).
func checkAddress(addr, scheme string) error {
	raw := addr
	if !strings.Contains(addr, "://") {
		raw = scheme + "://" + addr
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("invalid address %q: %w", addr, err)
	}
	switch u.Scheme {
	case "unix":
		if u.Path == "" {
			return fmt.Errorf("invalid address %q: no socket path", addr)
		}
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("invalid address %q: no host", addr)
		}
	default:
		return fmt.Errorf("invalid address %q: unknown scheme %q (want http, https or unix)", addr, u.Scheme)
	}
	return nil
}
