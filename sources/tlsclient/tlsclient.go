// Package tlsclient is the client side of TLS as the sources configure it:
// the `tls` block of a source's entry (CA file, client certificate and key,
// server name), its validation, and the *tls.Config it builds. The CA file
// is read when the configuration is built; the client certificate at
// every handshake, so that a renewed pair is used from the next
// connection on without a restart.
package tlsclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/xdsbridge/xdsbridge/settings"
)

// Files is the `tls` block of a source's entry.
type Files struct {
	// CAFile holds the PEM certificates of the CAs to trust instead of the
	// system's.
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are the client certificate and its key, both
	// or neither.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ServerName is the name to verify the server's certificate against
	// (default: the host the client connects to).
	ServerName string `mapstructure:"server_name"`
}

// Set reports whether any key of the block is set.
func (f Files) Set() bool { return f != Files{} }

// Validate reports a client certificate without its key or the reverse;
// keys are relative to the block's parent (`tls.key_file`).
func (f Files) Validate() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		key := "tls.key_file"
		if f.CertFile == "" {
			key = "tls.cert_file"
		}
		return settings.Errorf(key, "is required with tls.cert_file and tls.key_file together")
	}
	return nil
}

// Resolve makes the file paths absolute against dir, the directory of the
// configuration file.
func (f *Files) Resolve(dir string) {
	for _, p := range []*string{&f.CAFile, &f.CertFile, &f.KeyFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// Config builds the client's TLS configuration: TLS 1.2 at least, the CA
// file's certificates as roots when set, and the client certificate
// loaded at every handshake.
func (f Files) Config() (*tls.Config, error) {
	tc := &tls.Config{ServerName: f.ServerName, MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file %s holds no PEM certificate", f.CAFile)
		}
		tc.RootCAs = pool
	}
	if f.CertFile != "" {
		cert, key := f.CertFile, f.KeyFile
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("loading tls.cert_file and tls.key_file: %w", err)
			}
			return &c, nil
		}
	}
	return tc, nil
}
