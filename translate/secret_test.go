package translate

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "edge")
	pair := ca.Issue(dir, "edge", "edge.example.com")
	other := ca.Issue(dir, "other", "other.example.com")
	chain, key := readFile(t, pair.CertFile), readFile(t, pair.KeyFile)

	s, err := CertificateSecret("edge_cert", chain, key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.GetTlsCertificate().GetPrivateKey().GetInlineBytes(), key) ||
		!bytes.Equal(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes(), chain) {
		t.Fatal("secret does not carry the files' bytes")
	}
	v, err := ValidationSecret("edge_ca", readFile(t, ca.CertFile))
	if err != nil || !bytes.Equal(v.GetValidationContext().GetTrustedCa().GetInlineBytes(), readFile(t, ca.CertFile)) {
		t.Fatalf("validation secret: %v", err)
	}

	for _, tc := range []struct {
		name       string
		chain, key []byte
		err        string
	}{
		{"mismatched key", chain, readFile(t, other.KeyFile), "does not match"},
		{"no key", chain, nil, "PEM"},
		{"key as chain", key, key, "PEM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CertificateSecret("x", tc.chain, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if bytes.Contains([]byte(err.Error()), key[30:60]) {
				t.Fatalf("the error quotes the key: %v", err)
			}
		})
	}
	if _, err := ValidationSecret("x", key); err == nil || !strings.Contains(err.Error(), "want CERTIFICATE") {
		t.Fatalf("a key as CA bundle: %v", err)
	}
	if _, err := ValidationSecret("x", []byte("nothing")); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("no PEM: %v", err)
	}
}
