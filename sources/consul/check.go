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

// plainHTTP warns when max_connections, over plain HTTP with watches on,
// leaves room for fewer watches than the default budget would. The default
// itself is not warned about: whether it watches every service depends on
// the catalog, which validate does not read; the running source logs it
// and /sources says it when the catalog is larger than the room.
func (s *Source) plainHTTP() *sources.Problem {
	if s.cfg.Scheme != "http" || s.cfg.Watch == nil || !*s.cfg.Watch || s.cfg.MaxConnections == 0 {
		return nil
	}
	n := s.cfg.plan(false, consulDefaultConnsPerClient).capacity()
	def := s.cfg
	def.MaxConnections = 0
	if d := def.plan(false, consulDefaultConnsPerClient).capacity(); n < d {
		return &sources.Problem{Key: "max_connections", Warning: true, Origin: s.cfg.origin("max_connections"), Err: fmt.Errorf(
			"%d leaves room for %d watched services over plain HTTP (%d by default); the others are followed by censuses of the catalog (docs/consul.md)",
			s.cfg.MaxConnections, n, d)}
	}
	return nil
}
