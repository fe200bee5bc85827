package bridge_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	_ "github.com/xdsbridge/xdsbridge/plugins"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// mtlsFixture is a bridge serving xDS over mutual TLS with node ids bound
// to SPIFFE IDs, and the files of its certificates.
type mtlsFixture struct {
	dir     string
	ca      *tlstest.CA
	server  tlstest.Pair
	xds     string
	admin   string
	logs    *bridgetest.LogBuffer
	backend string
}

// startMTLS starts the bridge with a file source and the sources in
// extraSources (YAML list items).
func startMTLS(t *testing.T, extraSources string) *mtlsFixture {
	t.Helper()
	dir := t.TempDir()
	f := &mtlsFixture{dir: dir, ca: tlstest.NewCA(t, dir, "xds")}
	f.server = f.ca.Issue(dir, "server", "127.0.0.1")
	addr, port := grpcxdstest.Backend(t)
	f.backend = addr
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"),
		fmt.Appendf(nil, "services:\n  - name: greeter\n    endpoints: [{address: 127.0.0.1, port: %d}]\n", port), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte("admin-t0ken-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.logs = &bridgetest.LogBuffer{}
	in := bridgetest.StartIn(t, dir, fmt.Sprintf(`
xds:
  listen: 127.0.0.1:0
  tls: {cert_file: server.pem, key_file: server-key.pem, client_ca_file: %s, require_client_cert: true}
  identity:
    - {peer: "spiffe://test/node/*", node_id: "$1"}
admin: {listen: 127.0.0.1:0, token_file: admin-token}
log: {level: debug}
sources:
  - {name: static, type: file, path: services.yaml}
%s`, f.ca.CertFile, extraSources), f.logs)
	f.xds, f.admin = in.XDSAddr().String(), in.AdminAddr().String()
	return f
}

// adsStatus opens an ADS stream as node id (none if empty) with the given
// client pair (or none) and returns the status it ends with, or OK once it
// got a response.
func (f *mtlsFixture) adsStatus(t *testing.T, client *tlstest.Pair, id string) codes.Code {
	t.Helper()
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(f.ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if client != nil {
		pair, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn, err := grpc.NewClient(f.xds, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The status is the test's answer, so the deadline must never be it.
	ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Patience)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err == nil {
		req := &discoveryv3.DiscoveryRequest{
			TypeUrl:       "type.googleapis.com/envoy.config.cluster.v3.Cluster",
			ResourceNames: []string{"greeter"},
		}
		if id != "" {
			req.Node = &corev3.Node{Id: id}
		}
		err = st.Send(req)
	}
	if err == nil {
		_, err = st.Recv()
	}
	return status.Code(err)
}

// TestMTLSIdentity checks mutual TLS end to end: a grpc-go xDS client with a
// client certificate routes RPCs over mutual TLS; a client without a
// certificate, or claiming a node its SPIFFE ID is not bound to, is
// refused (the latter with PermissionDenied, counted); a certificate
// rotated on disk is served by the next handshake while the established
// channel keeps working.
func TestMTLSIdentity(t *testing.T) {
	f := startMTLS(t, "")
	good := f.ca.Issue(f.dir, "client-a", "spiffe://test/node/a")
	ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Patience)
	defer cancel()
	client := grpcxdstest.DialCreds(t, f.xds, "a", "greeter",
		grpcxdstest.TLSCreds(f.ca.CertFile, good.CertFile, good.KeyFile, "1s"))
	if hits := client.Hits(ctx, 5); hits[f.backend] != 5 {
		t.Fatalf("hits = %v, want 5 on %s", hits, f.backend)
	}

	if code := f.adsStatus(t, &good, "a"); code != codes.OK {
		t.Errorf("bound node: stream ended with %v", code)
	}
	if code := f.adsStatus(t, &good, "b"); code != codes.PermissionDenied {
		t.Errorf("node b with a's certificate: %v, want PermissionDenied", code)
	}
	if code := f.adsStatus(t, &good, "b"); code != codes.PermissionDenied {
		t.Errorf("second try: %v, want PermissionDenied", code)
	}
	if code := f.adsStatus(t, &good, ""); code != codes.PermissionDenied {
		t.Errorf("no node: %v, want PermissionDenied", code)
	}
	if code := f.adsStatus(t, nil, "a"); code != codes.Unavailable {
		t.Errorf("no client certificate: %v, want Unavailable (handshake refused)", code)
	}
	other := tlstest.NewCA(t, f.dir, "other").Issue(f.dir, "client-x", "spiffe://test/node/a")
	if code := f.adsStatus(t, &other, "a"); code != codes.Unavailable {
		t.Errorf("certificate of another CA: %v, want Unavailable", code)
	}
	if n := strings.Count(f.logs.String(), "refusing an xDS stream"); n != 2 {
		t.Errorf("refusals logged %d times, want once per node (2):\n%s", n, f.logs)
	}
	_, metrics := bridgetest.GetAuth("http://"+f.admin+"/metrics", "admin-t0ken-value")
	if !strings.Contains(metrics, "xdsbridge_xds_identity_denied_total 3") {
		t.Errorf("metrics lack xdsbridge_xds_identity_denied_total 3")
	}

	// Rotation: the next handshake presents the new certificate.
	if got := servedSerial(t, f); got.Cmp(f.server.Serial) != 0 {
		t.Fatalf("served serial %v, want %v", got, f.server.Serial)
	}
	rotated := f.ca.Issue(f.dir, "server", "127.0.0.1")
	if got := servedSerial(t, f); got.Cmp(rotated.Serial) != 0 {
		t.Errorf("after rotation served serial %v, want %v", got, rotated.Serial)
	}
	if !strings.Contains(f.logs.String(), "TLS files changed; new handshakes use the new certificate") {
		t.Error("the rotation was not logged")
	}
	if hits := client.Hits(ctx, 3); hits[f.backend] != 3 {
		t.Errorf("after rotation hits = %v", hits)
	}
	if code := f.adsStatus(t, &good, "a"); code != codes.OK {
		t.Errorf("after rotation a new stream ended with %v", code)
	}
}

// servedSerial handshakes with the xDS listener (with a client
// certificate, which it requires) and returns the serial of the
// certificate it presented.
func servedSerial(t *testing.T, f *mtlsFixture) *big.Int {
	t.Helper()
	pair := f.ca.Issue(f.dir, "probe", "spiffe://test/node/probe")
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", f.xds, &tls.Config{
		InsecureSkipVerify: true, // only the serial matters here
		Certificates:       []tls.Certificate{cert},
		NextProtos:         []string{"h2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestSecretsNotLogged runs a bridge with every secret configured (TLS
// keys, the admin token, a Consul token file) at debug level, exercises
// it, and greps its log for the secrets.
func TestSecretsNotLogged(t *testing.T) {
	consulToken := filepath.Join(t.TempDir(), "consul-token")
	if err := os.WriteFile(consulToken, []byte("c0nsul-t0ken-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A Consul source that cannot connect logs its failures; they must not
	// carry its token.
	f := startMTLS(t, fmt.Sprintf("  - {name: consul, type: consul, address: 127.0.0.1:1, token_file: %s, retry_max: 500ms, startup: {required: false, timeout: 1s}}\n", consulToken))
	bridgetest.WaitReady(t, f.admin, bridgetest.Patience)
	if code, _ := bridgetest.GetAuth("http://"+f.admin+"/sources", ""); code != http.StatusUnauthorized {
		t.Errorf("/sources without the token = %d, want 401", code)
	}
	if code, _ := bridgetest.GetAuth("http://"+f.admin+"/sources", "admin-t0ken-value"); code != http.StatusOK {
		t.Errorf("/sources with the token = %d", code)
	}
	if code, _ := bridgetest.GetAuth("http://"+f.admin+"/debug/pprof/", "admin-t0ken-value"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ by default = %d, want 404", code)
	}
	_ = f.adsStatus(t, nil, "a")
	key, err := os.ReadFile(f.server.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyBody := strings.Split(string(key), "\n")[1] // a line of the key's base64
	bridgetest.Eventually(t, bridgetest.Patience, "the consul source to log a failure", func() bool {
		return strings.Contains(f.logs.String(), "source=consul")
	})
	logs := f.logs.String()
	for _, secret := range []string{"admin-t0ken-value", "c0nsul-t0ken-value", keyBody, "PRIVATE KEY"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds a secret (%.12s...):\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, "serving xDS") {
		t.Errorf("log = %q, want the usual startup lines", logs)
	}
}

// TestAdminTLS checks the admin listener serves HTTPS with its own pair
// and nothing in plaintext.
func TestAdminTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "admin")
	ca.Issue(dir, "admin", "127.0.0.1")
	in := bridgetest.StartIn(t, dir, `
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0, tls: {cert_file: admin.pem, key_file: admin-key.pem}}
sources: [{name: empty, type: file, path: /dev/null}]
`, io.Discard)
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + in.AdminAddr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("https /healthz = %d", resp.StatusCode)
	}
	if code, _ := bridgetest.Get("http://" + in.AdminAddr().String() + "/healthz"); code == http.StatusOK {
		t.Error("plaintext /healthz answered 200 on a TLS listener")
	}
}
