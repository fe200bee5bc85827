package consul

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// TestConsulEndToEnd runs the end-to-end scenario small: a real Consul
// agent, the bridge binary built from this tree, SotW and delta clients.
func TestConsulEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bridge binary")
	}
	consul, bridge := consultest.Binary(t), bridgetest.Binary(t)
	for _, delta := range []bool{false, true} {
		t.Run(map[bool]string{false: "sotw", true: "delta"}[delta], func(t *testing.T) {
			r, err := Run(context.Background(), Config{
				ConsulBin: consul, BridgeBin: bridge, Clients: 3, Services: 5, Instances: 2, Changes: 3, Delta: delta,
				Timeout: 20 * time.Second, OutDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Failed {
				t.Fatalf("scenario failed: %s", r.Problem)
			}
			if r.ChangesDone != 3 || r.ConvP99 <= 0 || r.ResPerClientChange < 1 {
				t.Errorf("figures missing: %+v", r)
			}
		})
	}
}
