package bridge

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// TestReloadMerge checks that a reload applies a new merge section to the
// running bridge (without restarting its source), and that a configuration
// that fails to load changes nothing.
func TestReloadMerge(t *testing.T) {
	in, err := New(testConfig(), slog.New(slog.DiscardHandler), Build{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	g := <-gates
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	defer func() { cancel(); <-done }()

	reload := func(load func() (*config.Config, error)) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		defer rcancel()
		_, _ = in.Reload(rctx, load) // a failure is logged and counted, and changes nothing
	}

	c, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	close(g.release)
	subZone := func(want string) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second) // a failure detector, not a measurement
		defer wcancel()
		if err := c.WaitFor(wctx, func(s envoysim.State) bool {
			eps := s.Assignments["web"].GetEndpoints()
			return len(eps) == 1 && eps[0].GetLocality().GetSubZone() == want &&
				(want == "") == (s.Clusters["web"].GetCommonLbConfig() == nil)
		}); err != nil {
			t.Fatalf("waiting for sub-zone %q: %v; %s", want, err, c.State().Summary())
		}
	}
	subZone("")

	reload(func() (*config.Config, error) { return nil, errors.New("merge.default: unknown mode") })
	weighted := testConfig()
	w := int64(5)
	weighted.Merge = manager.MergeConfig{Services: []manager.MergeRule{{Service: "web", Mode: manager.MergeWeighted,
		Weights: []manager.SourceWeight{{Source: "gated", Weight: &w}}}}}
	reload(func() (*config.Config, error) { return weighted, nil })
	subZone("gated")
	reload(func() (*config.Config, error) { return testConfig(), nil })
	subZone("")
}
