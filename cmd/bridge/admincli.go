package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdsbridge/xdsbridge/internal/filestamp"
)

// defaultAdmin is where the commands that read a running bridge look by
// default: admin.listen's default.
const defaultAdmin = "http://127.0.0.1:19000"

// adminClient reads a running bridge's admin API.
type adminClient struct {
	base  *url.URL
	http  *http.Client
	token string
}

// adminFlags adds the flags that say how to reach the admin API.
func adminFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("admin", defaultAdmin, "the bridge's admin URL (or host:port)")
	f.String("token-file", os.Getenv("BRIDGE_ADMIN_TOKEN_FILE"), "file holding the admin bearer token (admin.token_file); default $BRIDGE_ADMIN_TOKEN_FILE")
	f.String("ca-file", "", "PEM CAs to verify the admin certificate with (admin.tls); implies https")
	f.String("cert-file", "", "PEM client certificate for admin.tls.require_client_cert; implies https")
	f.String("key-file", "", "PEM key of --cert-file")
	f.Duration("timeout", 5*time.Second, "how long a request may take")
}

// newAdminClient builds the client the flags of cmd describe. Flag
// mistakes are usage errors; an unreadable file is one too, since the
// command line names it.
func newAdminClient(cmd *cobra.Command) (*adminClient, error) {
	f := cmd.Flags()
	addr, _ := f.GetString("admin")
	tokenFile, _ := f.GetString("token-file")
	caFile, _ := f.GetString("ca-file")
	certFile, _ := f.GetString("cert-file")
	keyFile, _ := f.GetString("key-file")
	timeout, _ := f.GetDuration("timeout")
	useTLS := caFile != "" || certFile != ""
	if !strings.Contains(addr, "://") {
		addr = map[bool]string{false: "http://", true: "https://"}[useTLS] + addr
	}
	base, err := url.Parse(addr)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, usageError{fmt.Errorf("--admin: %q is not an http(s) URL or host:port", addr)}
	}
	c := &adminClient{base: base, http: &http.Client{Timeout: timeout}}
	if tokenFile != "" {
		if c.token, err = filestamp.ReadToken(tokenFile); err != nil {
			return nil, usageError{fmt.Errorf("--token-file: %w", err)}
		}
	}
	if base.Scheme == "https" {
		tc, err := clientTLS(caFile, certFile, keyFile)
		if err != nil {
			return nil, usageError{err}
		}
		c.http.Transport = &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}
	}
	return c, nil
}

// clientTLS is the TLS configuration for the admin listener: the system
// roots unless caFile is given, and a client certificate when certFile is.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file: no PEM certificate in %s", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("--cert-file and --key-file go together")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// get fetches path (with its query) and returns the status and body.
func (c *adminClient) get(ctx context.Context, path string) (int, []byte, error) {
	u := c.base.JoinPath(strings.SplitN(path, "?", 2)[0])
	if _, q, ok := strings.Cut(path, "?"); ok {
		u.RawQuery = q
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("requesting %s: %w", u, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil && c.base.Scheme == "http" && speaksHTTP2(ctx, c.base.Host, c.http.Timeout) {
		return 0, nil, fmt.Errorf("requesting %s: the server speaks HTTP/2 alone, as a gRPC server does: is this the xDS port (xds.listen)? "+
			"The admin API is at admin.listen (default %s)", u.Redacted(), defaultAdmin)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("requesting %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading %s: %w", u.Redacted(), err)
	}
	return resp.StatusCode, body, nil
}

// getOK is get for a path that must answer 200; anything else is an error
// carrying the answer's first line.
func (c *adminClient) getOK(ctx context.Context, path string) ([]byte, error) {
	code, body, err := c.get(ctx, path)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		return nil, fmt.Errorf("GET %s: %d %s", path, code, line)
	}
	return body, nil
}

// getJSON decodes the 200 answer of path into v.
func (c *adminClient) getJSON(ctx context.Context, path string, v any) error {
	body, err := c.getOK(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

// healthcheckCmd is `bridge healthcheck`: a probe for a container image
// without a shell or curl (Docker's HEALTHCHECK in a distroless image).
func healthcheckCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "healthcheck [--admin URL]",
		Short: "Exit 0 if a running bridge is ready (its /readyz answers 200), else 1",
		Long: `Healthcheck asks a running bridge's /readyz and exits 0 when it answers 200
(every source synced and xDS served), 1 otherwise, printing the answer. It
is meant for Docker's HEALTHCHECK in images without a shell or curl:

  HEALTHCHECK CMD ["/usr/local/bin/bridge", "healthcheck"]

With admin.tls set, pass --ca-file (and --cert-file/--key-file for
require_client_cert); https is then the default scheme. /readyz is not
behind admin.token_file, but a token given is sent.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newAdminClient(cmd)
			if err != nil {
				return err
			}
			code, body, err := c.get(cmd.Context(), "/readyz")
			if err != nil {
				return err
			}
			msg := strings.TrimSpace(string(body))
			if code != http.StatusOK {
				return fmt.Errorf("not ready (%d): %s", code, msg)
			}
			fmt.Fprintln(stdout, msg)
			return nil
		},
	}
	adminFlags(cmd)
	return cmd
}

// speaksHTTP2 reports whether the server at addr opens a connection with an
// HTTP/2 SETTINGS frame before the client says anything, as a gRPC server
// (the bridge's own xDS listener) does. An HTTP/1 request to such a server
// fails in one of several ways, depending on when the server closes the
// connection (a malformed response made of the frame's bytes, an
// unsolicited response, a reset), so the failure is explained by asking
// the server again, this way.
func speaksHTTP2(ctx context.Context, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(d)
	}
	// A frame header: a 24-bit length, the type (4 is SETTINGS), flags,
	// and the stream (0 for SETTINGS).
	var h [9]byte
	if _, err := io.ReadFull(conn, h[:]); err != nil {
		return false
	}
	return h[3] == 0x4 && h[5]|h[6]|h[7]|h[8] == 0
}
