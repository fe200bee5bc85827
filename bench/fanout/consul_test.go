package fanout

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// TestConsulEndToEnd runs the end-to-end scenario small: a real Consul
// agent, the bridge binary built from this tree, SotW and delta clients.
func TestConsulEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bridge binary")
	}
	consul, bridge := consultest.Binary(t), buildBridge(t)
	for _, delta := range []bool{false, true} {
		t.Run(map[bool]string{false: "sotw", true: "delta"}[delta], func(t *testing.T) {
			r, err := RunConsul(context.Background(), ConsulConfig{
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

// buildBridge builds the bridge binary of this tree into the test's
// temporary directory.
func buildBridge(t *testing.T) string {
	t.Helper()
	bridge := filepath.Join(t.TempDir(), "bridge")
	if out, err := exec.Command("go", "build", "-o", bridge, "github.com/xdsbridge/xdsbridge/cmd/bridge").CombinedOutput(); err != nil {
		t.Fatalf("building the bridge: %v\n%s", err, out)
	}
	return bridge
}
