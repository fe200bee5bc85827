package etcd

import (
	"context"
	"log/slog"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Type is the value of the `type` key that selects this source.
const Type = "etcd"

func init() {
	sources.Register(sources.Type{Name: Type, New: New})
}

// Source watches prefixes of one etcd cluster. Create it with New.
type Source struct {
	cfg    Config
	log    *slog.Logger
	status *sources.Status
}

var (
	_ sources.Source  = (*Source)(nil)
	_ sources.Checker = (*Source)(nil)
)

// New decodes and validates cfg. It does no I/O: etcd is first contacted
// by Run, and the password and certificate files are read there.
func New(cfg map[string]any, opts sources.Options) (sources.Source, error) {
	c := defaults()
	if err := settings.Decode(cfg, &c); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.resolve(opts.BaseDir)
	opts = opts.WithDefaults()
	return &Source{cfg: c, log: opts.Logger, status: opts.Status}, nil
}

// Run watches the prefixes until ctx is done (see sources.Source and the
// package doc).
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	return newLoop(s).run(ctx, up)
}

// Check reports the password and TLS files that cannot be read.
func (s *Source) Check() []sources.Problem {
	var out []sources.Problem
	for _, f := range []struct{ key, path string }{
		{"auth.password_file", s.cfg.Auth.PasswordFile},
		{"tls.ca_file", s.cfg.TLS.CAFile}, {"tls.cert_file", s.cfg.TLS.CertFile}, {"tls.key_file", s.cfg.TLS.KeyFile},
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
