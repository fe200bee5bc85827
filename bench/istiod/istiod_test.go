package istiod

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

func TestIstiodSmall(t *testing.T) {
	t.Setenv(xdsserver.ServeEnv, "1")
	var rs []*Result
	for _, impl := range xdsserver.IstioImpls {
		r, err := Run(context.Background(), Config{
			Bin: os.Args[0], Impl: impl, Services: 30, Instances: 3, Rate: 5, Duration: time.Second, Idle: 200 * time.Millisecond,
			Timeout: 20 * time.Second, OutDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Problem != "" {
			t.Fatalf("%s: %s", impl, r.Problem)
		}
		// Each change re-sends the collection with the endpoints, and
		// only it: the other collection's content is unchanged.
		if r.Changes != 5 || r.Endpoint != 5 || r.Pushes != 5 || len(r.Latencies) != 5 {
			t.Errorf("%s: %d changes, %d pushes (%d of the endpoint collection), %d latencies; want 5 each",
				impl, r.Changes, r.Pushes, r.Endpoint, len(r.Latencies))
		}
		if r.ServerCPU <= 0 || r.ClientCPU <= 0 || r.InitialBytes <= 0 || r.bytesPerPush() < float64(r.InitialBytes) {
			t.Errorf("%s: figures missing: %+v", impl, r)
		}
		rs = append(rs, r)
	}
	if sum := Summary(rs); !strings.Contains(sum, "| inline | 1 |") || !strings.Contains(sum, "| workload_entries | 1 |") {
		t.Errorf("summary without a row per shape:\n%s", sum)
	}
}

func TestIstiodConsulSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bridge binary and starts two Consul agents")
	}
	consul, bridge := consultest.Binary(t), bridgetest.Binary(t)
	for _, shape := range []string{"inline", "workload_entries"} {
		r, err := RunConsul(context.Background(), ConsulConfig{
			ConsulBin: consul, BridgeBin: bridge, Topology: "dev", TLS: true, Shape: shape, Services: 20,
			Changes: 4, Interval: 50 * time.Millisecond, Timeout: 30 * time.Second, OutDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Missed != 0 || len(r.Registered) != 2 || len(r.Deregistered) != 2 || r.HTTPSProto != "HTTP/2.0" {
			t.Errorf("%s: missed %d, %d registrations and %d deregistrations timed (want 2 each), HTTPS %q",
				shape, r.Missed, len(r.Registered), len(r.Deregistered), r.HTTPSProto)
		}
	}
}
