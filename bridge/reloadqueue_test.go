package bridge

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/test/testwait"
)

// TestReloadRequestsCoalesce checks that the requests made while a reload
// runs are served together by one more: 50 requests during a reload cost
// two reloads in all, and every request gets an outcome.
func TestReloadRequestsCoalesce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bridge.yaml")
	for name, content := range map[string]string{
		"services.yaml": "services:\n  - name: web\n    endpoints: [{address: 10.0.0.1, port: 80}]\n",
		"bridge.yaml":   "xds: {listen: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nsources:\n  - {name: files, type: file, path: services.yaml}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := New(cfg, slog.New(slog.DiscardHandler), Build{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var loads atomic.Int32
	in.ReloadFrom(func() (*config.Config, error) {
		if loads.Add(1) == 1 {
			close(entered)
			<-release
		}
		return config.Load(path, nil)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	errs := make(chan error, 51)
	ask := func(by string) {
		go func() {
			_, err := in.RequestReload(ctx, by)
			errs <- err
		}()
	}
	ask("first")
	<-entered
	for range 50 {
		ask("storm")
	}
	testwait.Eventually(t, testwait.Patience, "the 50 requests to wait for one reload", func() bool {
		in.reload.qmu.Lock()
		defer in.reload.qmu.Unlock()
		return in.reload.next != nil && in.reload.next.askedBy["storm"] == 50
	})
	close(release)
	for range 51 {
		if err := <-errs; err != nil {
			t.Errorf("request: %v", err)
		}
	}
	var applied dto.Metric
	if err := in.reload.total.WithLabelValues("applied").Write(&applied); err != nil {
		t.Fatal(err)
	}
	if n, a := loads.Load(), applied.GetCounter().GetValue(); n != 2 || a != 2 {
		t.Errorf("%d loads and %v reloads applied for 51 requests, want 2", n, a)
	}
}
