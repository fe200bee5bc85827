package bridge

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// The xDS client that grpc-go's testing resolver builds is never closed,
// and with TLS channel credentials it keeps the certificate file watcher
// it started (TestMTLSIdentity).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("google.golang.org/grpc/credentials/tls/certprovider/pemfile.(*watcher).run"))
}

// gate is a source that reports its services once release is closed.
type gate struct {
	release  chan struct{}
	services []sources.Service
	status   *sources.Status
}

func (g *gate) Run(ctx context.Context, up chan<- sources.Update) error {
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil
	}
	g.status.Succeeded()
	select {
	case up <- sources.Update{Full: true, Services: g.services}:
	case <-ctx.Done():
		return nil
	}
	<-ctx.Done()
	return nil
}

// gates hands the tests the source built by the "gate" type.
var gates = make(chan *gate, 1)

func init() {
	sources.Register(sources.Type{Name: "gate", New: func(_ map[string]any, opts sources.Options) (sources.Source, error) {
		g := &gate{release: make(chan struct{}), status: opts.Status, services: []sources.Service{
			{Name: "web", Endpoints: []sources.Endpoint{{Address: "10.0.0.1", Port: 80, Health: sources.HealthHealthy}}},
		}}
		select {
		case gates <- g:
		default:
		}
		return g, nil
	}})
}

func testConfig() *config.Config {
	cfg := &config.Config{
		XDS:     config.XDS{Listen: "127.0.0.1:0", Keepalive: config.Keepalive{Time: time.Minute, Timeout: time.Second, MinClientInterval: time.Second}},
		Admin:   config.Admin{Listen: "127.0.0.1:0"},
		Holdoff: config.Holdoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Entries: []config.Source{{Name: "gated", Type: "gate", Settings: map[string]any{}}},
	}
	cfg.XDS.GRPC.Enabled = true
	return cfg
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestRun starts an instance, checks readiness follows the source's first
// sync and that a client gets the service, then stops it with a client
// still connected: Run must return nil within the shutdown bound and leave
// no goroutine behind.
func TestRun(t *testing.T) {
	in, err := New(testConfig(), slog.New(slog.DiscardHandler), Build{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	g := <-gates
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		case <-time.After(shutdownTimeout + 5*time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
	defer stop()

	admin := "http://" + in.AdminAddr().String()
	code, body := get(t, admin+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "gated") {
		t.Errorf("/readyz before sync = %d %q", code, body)
	}
	c, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	close(g.release)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second) // a failure detector, not a measurement
	defer wcancel()
	if err := c.WaitFor(wctx, func(s envoysim.State) bool {
		return s.Clusters["web"] != nil && len(s.Assignments["web"].GetEndpoints()) == 1
	}); err != nil {
		t.Fatalf("client: %v; %s", err, c.State().Summary())
	}
	// The manager publishes the first state and only then marks itself
	// ready, so the client may hold the state a moment before /readyz
	// says so: wait for it, within the client's deadline.
	for tick := time.NewTicker(10 * time.Millisecond); ; {
		code, body := get(t, admin+"/readyz")
		if code == http.StatusOK {
			tick.Stop()
			break
		}
		select {
		case <-tick.C:
			continue
		case <-wctx.Done():
			t.Fatalf("/readyz after sync = %d %q", code, body)
		}
	}
	_, body = get(t, admin+"/metrics")
	for _, want := range []string{"xdsbridge_services 1", "xdsbridge_memory_returns_total ", "xdsbridge_memory_returned_bytes_total "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Stop with the client's stream still open: the graceful stop cannot
	// finish, so the stream is cut after shutdownTimeout.
	began := time.Now()
	stop()
	t.Logf("stopped in %s with a stream open", time.Since(began))
}

func TestListenErrorNamesKey(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, key := range []string{"xds.listen", "admin.listen"} {
		cfg := testConfig()
		if key == "xds.listen" {
			cfg.XDS.Listen = taken.Addr().String()
		} else {
			cfg.Admin.Listen = taken.Addr().String()
		}
		_, err := New(cfg, slog.New(slog.DiscardHandler), Build{Version: "test"})
		<-gates
		if err == nil || !strings.HasPrefix(err.Error(), key+": listen tcp") {
			t.Errorf("%s taken: error %v, want it to start with %q", key, err, key+": listen tcp")
		}
	}
}
