// Package etcdtest starts a real etcd server for integration tests and
// benchmarks (Start, Launch): a single member on free loopback ports
// (client, peer, metrics), its own data directory, fsync off (it is
// thrown away), its log in the test's temporary directory (printed when
// the test fails), and Stop, Kill and Restart on the same ports and data,
// so that tests can take etcd away and bring it back. Registrar writes
// what each registry format's real registrar writes (register.go).
//
// The binary is found by Binary: $XDSBRIDGE_ETCD, else `etcd` on PATH,
// else the cache that scripts/tools.sh fills (built from the tools/etcd
// module). Without one the test is skipped, or fails when
// XDSBRIDGE_INTEGRATION=required.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/xdsbridge/xdsbridge/sources/tlsclient"
	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/promtext"
	"github.com/xdsbridge/xdsbridge/test/testbin"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// Version is the etcd version the tools module builds.
const Version = "3.7.3"

// startLimit bounds the wait for a started member to serve.
const startLimit = 60 * time.Second

// Binary returns the path of the etcd binary, or skips (fails, when
// XDSBRIDGE_INTEGRATION=required) the test when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	return testbin.Find(t, "XDSBRIDGE_ETCD", "etcd", Version)
}

// Server is a running (or stopped) single-member etcd.
type Server struct {
	// ClientURL is the client endpoint for the client under test (https://
	// under WithTLS); AdminURL a second one for the test's own writes,
	// which Isolate keeps open; MetricsURL the plain-HTTP listener of
	// /metrics and /health.
	ClientURL, AdminURL, MetricsURL string
	// DataDir is the member's data directory.
	DataDir string
	// TLS holds the files a client needs under WithTLS; nil otherwise.
	TLS *TLSFiles

	bin     string
	args    []string
	logPath string
	// isolated: the member serves AdminURL only (see Isolate).
	isolated bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// TLSFiles are the CA a client trusts and a client certificate that the
// server accepts.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

// Option changes how the server runs.
type Option func(*options)

type options struct {
	tls  bool
	args []string
}

// WithTLS serves clients over TLS only and requires a client certificate
// signed by the server's CA (Server.TLS names the files).
func WithTLS() Option { return func(o *options) { o.tls = true } }

// Start launches a member in the test's temporary directory, waits until
// it serves, and stops it when the test ends (printing its log if the
// test failed).
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin := Binary(t)
	s, err := Launch(bin, t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(s.logPath); err == nil {
				t.Logf("etcd log:\n%s", b)
			}
		}
	})
	return s
}

// Launch starts a member of the binary bin in dir and waits until it
// serves; the caller stops it. It is Start for programs without a test.
func Launch(bin, dir string, opts ...Option) (*Server, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	ports, err := freeport.Take(4)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	s := &Server{bin: bin, DataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "etcd.log")}
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s.MetricsURL = "http://127.0.0.1:" + strconv.Itoa(ports[2])
	if o.tls {
		scheme = "https"
		ca, err := tlstest.WriteCA(dir, "etcd")
		if err != nil {
			return nil, err
		}
		srv, err := ca.Write(dir, "etcd-server", "127.0.0.1", "localhost")
		if err != nil {
			return nil, err
		}
		cli, err := ca.Write(dir, "etcd-client", "client")
		if err != nil {
			return nil, err
		}
		s.TLS = &TLSFiles{CAFile: ca.CertFile, CertFile: cli.CertFile, KeyFile: cli.KeyFile}
		o.args = append(o.args, "--client-cert-auth", "--trusted-ca-file", ca.CertFile,
			"--cert-file", srv.CertFile, "--key-file", srv.KeyFile)
	}
	s.ClientURL = scheme + "://127.0.0.1:" + strconv.Itoa(ports[0])
	s.AdminURL = scheme + "://127.0.0.1:" + strconv.Itoa(ports[3])
	s.args = append([]string{
		"--name", "m1", "--data-dir", s.DataDir, "--advertise-client-urls", s.ClientURL,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "m1=" + peer,
		"--listen-metrics-urls", s.MetricsURL,
		"--log-level", "warn", "--unsafe-no-fsync",
	}, o.args...)
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening etcd's log: %w", err)
	}
	listen := s.ClientURL + "," + s.AdminURL
	if s.isolated {
		listen = s.AdminURL
	}
	cmd := exec.Command(s.bin, append([]string{"--listen-client-urls", listen}, s.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.Tie(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting etcd: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return s.waitHealthy(done)
}

// waitHealthy polls /health on the metrics listener until the member has
// a leader and serves.
func (s *Server) waitHealthy(exited <-chan struct{}) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(startLimit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := hc.Get(s.MetricsURL + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(s.logPath)
			return fmt.Errorf("etcd exited before serving; its log:\n%s", b)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not healthy after %s", startLimit)
		}
	}
}

// Stop terminates the member gracefully (SIGTERM, then SIGKILL after 10 s)
// and waits for it to exit. Stopping a stopped member does nothing.
func (s *Server) Stop() { s.stop(os.Interrupt) }

// Kill terminates the member at once, as a crash would.
func (s *Server) Kill() { s.stop(os.Kill) }

// Restart stops the member and starts it again on the same ports and data
// directory; it returns once the member serves.
func (s *Server) Restart() error {
	s.Stop()
	s.isolated = false
	return s.start()
}

// Isolate restarts the member serving AdminURL only: to the client under
// test etcd is down (its connections are refused), while the test goes on
// writing through AdminURL. Restart ends it.
func (s *Server) Isolate() error {
	s.Stop()
	s.isolated = true
	return s.start()
}

func (s *Server) stop(sig os.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// NewClient returns a client of the member's AdminURL (with the client
// certificate under WithTLS), logging nothing; the caller closes it.
func (s *Server) NewClient() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{s.AdminURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if s.TLS != nil {
		tc, err := tlsclient.Files{CAFile: s.TLS.CAFile, CertFile: s.TLS.CertFile, KeyFile: s.TLS.KeyFile}.Config()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}

// Client is NewClient for a test: it fails the test on error and closes
// the client when the test ends.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := s.NewClient()
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Compact compacts the key space up to the current revision and returns
// that revision: every watch from an earlier revision is then cancelled
// with ErrCompacted.
func (s *Server) Compact(ctx context.Context) (int64, error) {
	c, err := s.NewClient()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	// Status, not a read: tests count the reads the source makes.
	resp, err := c.Status(ctx, s.AdminURL)
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, err
	}
	return rev, nil
}

// Metrics reads the member's /metrics (see promtext.Scrape). Among them:
// grpc_server_handled_total{grpc_code="OK",grpc_method="Range",...}
// counts the reads served, grpc_server_started_total{...,"Watch",...} the
// watch streams opened, etcd_debugging_mvcc_watcher_total the watches
// held, etcd_network_client_grpc_sent_bytes_total the bytes sent to
// clients.
func (s *Server) Metrics() (map[string]float64, error) {
	return promtext.Scrape(s.MetricsURL + "/metrics")
}

// errNoMetric is returned by Count when no sample matches.
var errNoMetric = errors.New("no such metric")

// Count sums the samples of the metric name whose labels include every
// label=value pair of labels (such as `grpc_method="Range"`).
func Count(m map[string]float64, name string, labels ...string) (float64, error) {
	var sum float64
	found := false
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k[len(name):], l)
		}
		if ok {
			sum += v
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("%s%v: %w", name, labels, errNoMetric)
	}
	return sum, nil
}

// Wipe stops the member, deletes its data and starts it again empty on
// the same ports, as a cluster rebuilt from scratch: its revision starts
// over.
func (s *Server) Wipe() error {
	s.Stop()
	if err := os.RemoveAll(s.DataDir); err != nil {
		return err
	}
	return s.start()
}

// EnableAuth turns etcd's authentication on, with a root user (password
// "root") and user, whose password is password and whose role may read
// every key under prefix and nothing else.
func (s *Server) EnableAuth(ctx context.Context, user, password, prefix string) error {
	c, err := s.NewClient()
	if err != nil {
		return err
	}
	defer c.Close()
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", "root"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "reader", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, user, password); return err },
		func() error { _, err := c.UserGrantRole(ctx, user, "reader"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("enabling authentication: %w", err)
		}
	}
	return nil
}
