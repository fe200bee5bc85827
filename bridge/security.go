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

// The configuration keys of the listeners' TLS settings: errors name them,
// and they label xdsbridge_tls_reload_failures_total.
const (
	xdsTLSKey   = "xds.tls"
	adminTLSKey = "admin.tls"
)

// newSecurity reads the certificate files once (errors name the key) and
// sets up their reloading.
func newSecurity(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (*security, error) {
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xdsbridge_tls_reload_failures_total",
		Help: "Failed re-reads of a listener's changed TLS files (the previous certificate stays in use).",
	}, []string{"key"})
	// Both listeners' series and the identity counter exist from the start,
	// TLS or identity configured or not, so that alerts on their increase
	// see the first failure (see the xds package's metrics).
	failures.WithLabelValues(xdsTLSKey)
	failures.WithLabelValues(adminTLSKey)
	denied := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xdsbridge_xds_identity_denied_total",
		Help: "xDS streams refused because the node they claim is not bound to their client certificate.",
	})
	reg.MustRegister(failures, denied)
	sec := &security{}
	if cfg.XDS.TLS.Enabled() {
		r, err := newReloadingTLS(cfg.XDS.TLS, xdsTLSKey, []string{"h2"}, log, failures)
		if err != nil {
			return nil, err
		}
		sec.grpcOpts = append(sec.grpcOpts, grpc.Creds(credentials.NewTLS(r.config())))
	}
	if len(cfg.XDS.Identity) > 0 {
		id := newIdentity(cfg.XDS.Identity, log.With("component", "identity"), denied)
		sec.grpcOpts = append(sec.grpcOpts, grpc.ChainStreamInterceptor(id.stream))
	}
	if cfg.Admin.TLS.Enabled() {
		r, err := newReloadingTLS(cfg.Admin.TLS, adminTLSKey, []string{"http/1.1"}, log, failures)
		if err != nil {
			return nil, err
		}
		sec.adminTLS = r.config()
	}
	return sec, nil
}
