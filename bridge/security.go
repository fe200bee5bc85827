package bridge

import (
	"crypto/tls"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/xdsbridge/xdsbridge/config"
)

// security is what the TLS and identity settings add to the listeners:
// gRPC server options for xDS and the admin listener's TLS configuration
// (nil for plaintext). TLS and identity live here, at the listeners; the
// xDS engine knows nothing of them.
type security struct {
	grpcOpts []grpc.ServerOption
	adminTLS *tls.Config
}

// newSecurity reads the certificate files once (errors name the key) and
// sets up their reloading.
func newSecurity(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (*security, error) {
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xdsbridge_tls_reload_failures_total",
		Help: "Failed re-reads of a listener's changed TLS files (the previous certificate stays in use).",
	}, []string{"key"})
	reg.MustRegister(failures)
	sec := &security{}
	if cfg.XDS.TLS.Enabled() {
		r, err := newReloadingTLS(cfg.XDS.TLS, "xds.tls", []string{"h2"}, log, failures)
		if err != nil {
			return nil, err
		}
		sec.grpcOpts = append(sec.grpcOpts, grpc.Creds(credentials.NewTLS(r.config())))
	}
	if len(cfg.XDS.Identity) > 0 {
		id := newIdentity(cfg.XDS.Identity, log.With("component", "identity"), reg)
		sec.grpcOpts = append(sec.grpcOpts, grpc.ChainStreamInterceptor(id.stream))
	}
	if cfg.Admin.TLS.Enabled() {
		r, err := newReloadingTLS(cfg.Admin.TLS, "admin.tls", []string{"http/1.1"}, log, failures)
		if err != nil {
			return nil, err
		}
		sec.adminTLS = r.config()
	}
	return sec, nil
}
