package consul

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/sources"
)

var _ sources.Checker = (*Source)(nil)

// Check reports, for `bridge validate`, named files that cannot be read,
// each an error (the source would fail every read until the configuration
// is fixed), and keys that have no effect, as warnings. (An address that
// does not parse is caught by New.)
func (s *Source) Check() []sources.Problem {
	var out []sources.Problem
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
			out = append(out, sources.Problem{Key: f.key, Err: err, Origin: s.cfg.origin(f.key)})
		}
	}
	if p := s.plainHTTP(); p != nil {
		out = append(out, *p)
	}
	if s.cfg.ResyncGrace != nil {
		out = append(out, sources.Problem{Key: "resync_grace", Err: errResyncGrace, Warning: true, Origin: s.cfg.origin("resync_grace")})
	}
	return out
}

// errResyncGrace says why resync_grace is ignored (see Config.ResyncGrace).
var errResyncGrace = errors.New("has no effect any more: after Consul loses its state the removal guard keeps the last good state until the refill settles (guard.hold); remove the key")

// checkAddress accepts what the Consul API client accepts: host:port, or a
// URL with a scheme (http, https, or unix with a socket path).
func checkAddress(addr, scheme string) error {
	raw := addr
	if !strings.Contains(addr, "://") {
		raw = scheme + "://" + addr
	}
	const want = "want host:port or an http://, https:// or unix:// URL"
	u, err := scalar.URL(raw)
	if err != nil {
		return fmt.Errorf("%q is not an address (%s): %w", addr, want, err)
	}
	switch u.Scheme {
	case "unix":
		if u.Path == "" {
			return fmt.Errorf("%q has no socket path", addr)
		}
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("%q has no host (%s)", addr, want)
		}
	default:
		return fmt.Errorf("%q has the unknown scheme %q (%s)", addr, u.Scheme, want)
	}
	return nil
}

// plainHTTP warns, over plain HTTP with watches on, how many services can
// be watched at most: each watch holds one of the connections the agent
// allows one client address, and the services beyond are swept.
func (s *Source) plainHTTP() *sources.Problem {
	if s.cfg.Scheme != "http" || s.cfg.Watch == nil || !*s.cfg.Watch {
		return nil
	}
	limit := "max_connections"
	if s.cfg.MaxConnections == 0 {
		limit = fmt.Sprintf("Consul's default http_max_conns_per_client (%d)", consulDefaultConnsPerClient)
	}
	n := s.cfg.plan(false, consulDefaultConnsPerClient).capacity()
	return &sources.Problem{Key: "scheme", Warning: true, Err: fmt.Errorf(
		"plain HTTP: each watch holds one of the agent's connections, so with %s at most %d services are watched and the others swept (a change no bulk query sees waits for a sweep on them: seconds at 2,000 services, tens of seconds at 10,000); an HTTPS listener on the agent (HTTP/2, 200 watches per connection) or a higher http_max_conns_per_client watches more",
		limit, n)}
}
