package bridge

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/internal/filestamp"
	"github.com/xdsbridge/xdsbridge/internal/pacing"
	"github.com/xdsbridge/xdsbridge/settings"
)

// keyPair is what a listener's TLS files hold.
type keyPair struct {
	cert *tls.Certificate
	cas  *x509.CertPool // nil without client_ca_file
}

// reloadingTLS serves a listener's certificate and client CAs from files,
// re-read when they change: every handshake stats them and a changed file
// is parsed again, so a rotated pair is used by the next handshake while
// established connections keep theirs. A pair that fails to parse (one file
// rewritten, the other not yet) is parsed again only once a file changes,
// its error is logged when it is new (the same one at most once a minute)
// and counted once, and the last good pair stays in use.
type reloadingTLS struct {
	cfg      config.TLS
	key      string // the configuration key, for logs and errors
	alpn     []string
	log      *slog.Logger
	failures prometheus.Counter

	mu      sync.Mutex
	files   filestamp.Cache[keyPair]
	fails   *pacing.FailureLog
	lastErr string // the last error counted in failures
}

// newReloadingTLS reads the files of cfg once; an error names key.
func newReloadingTLS(cfg config.TLS, key string, alpn []string, log *slog.Logger, failures *prometheus.CounterVec) (*reloadingTLS, error) {
	r := &reloadingTLS{cfg: cfg, key: key, alpn: alpn, log: log, failures: failures.WithLabelValues(key),
		fails: &pacing.FailureLog{Log: log, Level: slog.LevelError, NewErrors: true,
			FailingMsg:   "reloading TLS files failed; the previous certificate stays in use",
			RecoveredMsg: "TLS files valid again; new handshakes use the new certificate"}}
	r.files = filestamp.Cache[keyPair]{
		Paths: []string{cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile},
		Parse: r.parse,
	}
	if _, err := r.files.Get(); err != nil {
		return nil, settings.Prefix(key, err)
	}
	return r, nil
}

func (r *reloadingTLS) parse() (keyPair, error) {
	cert, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return keyPair{}, fmt.Errorf("loading cert_file and key_file: %w", err)
	}
	kp := keyPair{cert: &cert}
	if r.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(r.cfg.ClientCAFile)
		if err != nil {
			return keyPair{}, fmt.Errorf("reading client_ca_file: %w", err)
		}
		kp.cas = x509.NewCertPool()
		if !kp.cas.AppendCertsFromPEM(pem) {
			return keyPair{}, errors.New("client_ca_file: no PEM certificate in " + r.cfg.ClientCAFile)
		}
	}
	return kp, nil
}

// current returns the pair to use now, re-read if a file changed.
func (r *reloadingTLS) current() keyPair {
	r.mu.Lock()
	defer r.mu.Unlock()
	loads := r.files.Loads
	kp, err := r.files.Get()
	switch {
	case err != nil:
		if err.Error() != r.lastErr {
			r.lastErr = err.Error()
			r.failures.Inc()
		}
		r.fails.Failed(err, "key", r.key)
	case r.files.Loads != loads:
		r.lastErr = ""
		attrs := []any{"key", r.key}
		if leaf := kp.cert.Leaf; leaf != nil { // LoadX509KeyPair fills it in since Go 1.23
			attrs = append(attrs, "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		if !r.fails.Recovered(attrs...) {
			r.log.Info("TLS files changed; new handshakes use the new certificate", attrs...)
		}
	}
	return kp
}

// config returns the listener's TLS configuration.
func (r *reloadingTLS) config() *tls.Config {
	auth := tls.NoClientCert
	switch {
	case r.cfg.RequireClientCert:
		auth = tls.RequireAndVerifyClientCert
	case r.cfg.ClientCAFile != "":
		auth = tls.VerifyClientCertIfGiven
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: r.alpn,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			kp := r.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   r.alpn,
				Certificates: []tls.Certificate{*kp.cert},
				ClientCAs:    kp.cas,
				ClientAuth:   auth,
			}, nil
		},
	}
}
