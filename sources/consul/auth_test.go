package consul

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
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/consultest"
)

const rootToken = "3c1b9c3e-1c9e-4d1b-9f6a-8a5b2d4e6f70"

// aclAgent starts an agent whose ACLs deny by default, and returns it with
// a client holding the management token.
func aclAgent(t *testing.T) (*consultest.Agent, *api.Client) {
	t.Helper()
	agent := consultest.Start(t, consultest.WithHCL(fmt.Sprintf(`
acl {
  enabled = true
  default_policy = "deny"
  tokens {
    initial_management = %q
    agent = %q
  }
}`, rootToken, rootToken)))
	return agent, agent.Client(rootToken)
}

// aclToken creates a policy of rules and a token holding it, and returns
// the token's secret.
func aclToken(t *testing.T, mc *api.Client, name, rules string) string {
	t.Helper()
	pol, _, err := mc.ACL().PolicyCreate(&api.ACLPolicy{Name: name, Rules: rules}, nil)
	if err != nil {
		t.Fatalf("creating policy: %v", err)
	}
	tok, _, err := mc.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatalf("creating token: %v", err)
	}
	return tok.SecretID
}

// readRules may read every service and node.
const readRules = `service_prefix "" { policy = "read" }
node_prefix "" { policy = "read" }
`

// TestToken runs an agent whose ACLs deny by default: a source with a read
// token (given as token or token_file) sees the service, one without sees
// nothing.
func TestToken(t *testing.T) {
	agent, mc := aclAgent(t)
	secret := aclToken(t, mc, "read-all", readRules)
	register(t, mc, &api.AgentServiceRegistration{ID: "sec-1", Name: "sec", Address: "10.0.4.1", Port: 4001})

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sel := map[string]any{"include": []any{"sec"}}
	byToken := startSource(t, agent, map[string]any{"services": sel, "token": secret})
	byFile := startSource(t, agent, map[string]any{"services": sel, "token_file": tokenFile})
	anonymous := startSource(t, agent, map[string]any{"services": sel})
	for name, r := range map[string]*running{"token": byToken, "token_file": byFile} {
		r.synced(patience)
		r.waitFor(patience, name+": sec visible", func() bool { return len(r.endpointsOf("sec")) == 1 })
	}
	anonymous.synced(patience)
	if _, ok := anonymous.service("sec"); ok {
		t.Error("a source without a token sees sec")
	}
}

// TestTLS runs an agent whose HTTPS port requires client certificates from
// a test CA: a source with the CA, a client certificate and the server
// name syncs; one without the CA, and one without a client certificate,
// keep failing.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	agent := consultest.Start(t, consultest.WithHTTPS(), consultest.WithHCL(fmt.Sprintf(`
tls {
  defaults {
    ca_file = %q
    cert_file = %q
    key_file = %q
  }
  https {
    verify_incoming = true
  }
}`, pki.ca, pki.serverCert, pki.serverKey)))
	register(t, agent.Client(), &api.AgentServiceRegistration{ID: "tls-1", Name: "tls", Address: "10.0.5.1", Port: 5001})

	sel := map[string]any{"include": []any{"tls"}}
	var cc connCounter
	var protos sync.Map
	good := startSource(t, agent, map[string]any{"services": sel, "address": agent.HTTPSAddr, "scheme": "https",
		"tls": map[string]any{"ca_file": pki.ca, "cert_file": pki.clientCert, "key_file": pki.clientKey, "server_name": "server.dc1.consul"}},
		func(s *Source) {
			s.dial = cc.dial
			s.wrap = func(next http.RoundTripper) http.RoundTripper {
				return rtFunc(func(req *http.Request) (*http.Response, error) {
					resp, err := next.RoundTrip(req)
					if err == nil {
						protos.Store(resp.Proto, true)
					}
					return resp, err
				})
			}
		})
	noCA := startSource(t, agent, map[string]any{"services": sel, "address": agent.HTTPSAddr, "scheme": "https",
		"tls": map[string]any{"cert_file": pki.clientCert, "key_file": pki.clientKey}})
	noCert := startSource(t, agent, map[string]any{"services": sel, "address": agent.HTTPSAddr, "scheme": "https",
		"tls": map[string]any{"ca_file": pki.ca}})
	good.synced(patience)
	good.waitFor(patience, "tls visible over https", func() bool { return len(good.endpointsOf("tls")) == 1 })
	// HTTP/2: the three blocking queries and the reads share connections.
	_, maxOpen, _ := cc.figures()
	_, h2 := protos.Load("HTTP/2.0")
	t.Logf("over HTTPS: HTTP/2 %v, at most %d connections open", h2, maxOpen)
	if !h2 || maxOpen > 2 {
		t.Errorf("over HTTPS: HTTP/2 %v, %d connections; want HTTP/2 on one connection", h2, maxOpen)
	}
	noCA.waitFor(patience, "source without the CA failing", func() bool {
		s := noCA.status.Snapshot()
		return s.Stale && strings.Contains(s.LastError, "certificate")
	})
	noCert.waitFor(patience, "source without a client certificate failing", func() bool {
		s := noCert.status.Snapshot()
		return s.Stale && strings.Contains(s.LastError, "certificate")
	})
	if noCA.updateCount() != 0 || noCert.updateCount() != 0 {
		t.Error("a source that failed the TLS handshake published")
	}
}

type testPKI struct{ ca, serverCert, serverKey, clientCert, clientKey string }

// newTestPKI writes a CA, a server certificate for 127.0.0.1 and
// server.dc1.consul, and a client certificate, all signed by the CA.
func newTestPKI(t testing.TB, dir string) testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xdsbridge test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := testPKI{ca: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dns, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		certPath, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, certPath, "CERTIFICATE", der)
		writePEM(t, keyPath, "EC PRIVATE KEY", keyDER)
		return certPath, keyPath
	}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth, []string{"server.dc1.consul", "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth, nil, nil)
	return p
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
