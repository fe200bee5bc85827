// Package tlstest makes throwaway certificate authorities and certificates
// for tests and benchmarks, and writes them as PEM files. Nothing it makes
// is meant for anything but a test on loopback.
//
// NewCA and Issue fail the test on error; WriteCA and Write return the
// error, for programs such as the benchmark harness that have no test.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

var serial atomic.Int64

// CA is a certificate authority.
type CA struct {
	t    testing.TB // nil for a CA made by WriteCA
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate as a PEM file.
	CertFile string
}

// NewCA makes a CA and writes its certificate to dir/name-ca.pem.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	ca, err := WriteCA(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	ca.t = t
	return ca
}

// WriteCA makes a CA and writes its certificate to dir/name-ca.pem.
func WriteCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making a CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("making a CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("making a CA certificate: %w", err)
	}
	ca := &CA{cert: cert, key: key, CertFile: filepath.Join(dir, name+"-ca.pem")}
	return ca, writePEM(ca.CertFile, "CERTIFICATE", der)
}

// Pair is a certificate and its key as files.
type Pair struct {
	CertFile, KeyFile string
	// Serial is the certificate's serial number.
	Serial *big.Int
}

// Issue makes a certificate for both server and client use, with the
// given SANs: URIs (spiffe://...), IP addresses or DNS names, and writes it
// to dir/name.pem and dir/name-key.pem (replacing what is there, by rename,
// as a rotation would). The CA must come from NewCA; use Write otherwise.
func (ca *CA) Issue(dir, name string, sans ...string) Pair {
	ca.t.Helper()
	p, err := ca.Write(dir, name, sans...)
	if err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// Write is Issue returning its error.
func (ca *CA) Write(dir, name string, sans ...string) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("making a key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if u, err := url.Parse(s); err == nil && u.Scheme != "" {
			tmpl.URIs = append(tmpl.URIs, u)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("issuing %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encoding the key of %s: %w", name, err)
	}
	p := Pair{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem"), Serial: tmpl.SerialNumber}
	if err := writePEM(p.KeyFile, "PRIVATE KEY", keyDER); err != nil {
		return Pair{}, err
	}
	return p, writePEM(p.CertFile, "CERTIFICATE", der)
}

// writePEM writes one PEM block to path through a temporary file and a
// rename, so that a reader sees the old or the new file, never half.
func writePEM(path, typ string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
