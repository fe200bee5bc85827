package translate

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// CertificateSecret builds the SDS secret name holding a certificate chain
// and its private key (PEM), which must belong together. Errors never
// quote the key: crypto/tls says what is wrong (no PEM data, a key that
// does not match), never what the bytes are.
func CertificateSecret(name string, chain, key []byte) (*tlsv3.Secret, error) {
	if name == "" {
		return nil, errors.New("empty secret name")
	}
	if _, err := tls.X509KeyPair(chain, key); err != nil {
		return nil, fmt.Errorf("the certificate chain and private key are not a valid pair: %w", err)
	}
	s := &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inlineBytes(chain),
		PrivateKey:       inlineBytes(key),
	}}}
	if err := s.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validating secret %q: %w", name, err)
	}
	return s, nil
}

// ValidationSecret builds the SDS secret name holding a validation context:
// the CA certificates (PEM) that peer certificates are verified against.
func ValidationSecret(name string, ca []byte) (*tlsv3.Secret, error) {
	if name == "" {
		return nil, errors.New("empty secret name")
	}
	if err := checkCertificates(ca); err != nil {
		return nil, err
	}
	s := &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: inlineBytes(ca),
	}}}
	if err := s.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validating secret %q: %w", name, err)
	}
	return s, nil
}

func inlineBytes(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

// checkCertificates checks that pemData holds one or more certificates and
// nothing else.
func checkCertificates(pemData []byte) error {
	n := 0
	for rest := pemData; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %d is a %q, want CERTIFICATE", n+1, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("PEM block %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificate found")
	}
	return nil
}
