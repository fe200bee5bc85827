package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/sources"
)

// feed is a source that reports what the test sends it.
type feed struct {
	up     chan sources.Update
	status *sources.Status
}

func (f *feed) Run(ctx context.Context, up chan<- sources.Update) error {
	for {
		select {
		case u := <-f.up:
			f.status.Succeeded()
			select {
			case up <- u:
			case <-ctx.Done():
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// feeds hands the tests the source built by the "feed" type.
var feeds = make(chan *feed, 1)

func init() {
	sources.Register(sources.Type{Name: "feed", New: func(_ map[string]any, opts sources.Options) (sources.Source, error) {
		f := &feed{up: make(chan sources.Update), status: opts.Status}
		select {
		case feeds <- f:
		default:
		}
		return f, nil
	}})
}

// manyServices are n services of one endpoint each.
func manyServices(n int) []sources.Service {
	out := make([]sources.Service, n)
	for i := range out {
		out[i] = sources.Service{Name: fmt.Sprintf("svc-%d", i), Endpoints: []sources.Endpoint{
			{Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 80, Health: sources.HealthHealthy}}}
	}
	return out
}

// TestMemoryReturnedAfterShrink: a registry that shrinks from 10,000
// services to 6 leaves most of the live heap garbage while allocating
// little. With default memory settings the bridge returns it once quiet,
// as memory.return_after_quiet promises; it used not to, because the
// shrink's allocation alone was too small a burst to be worth it.
func TestMemoryReturnedAfterShrink(t *testing.T) {
	cfg := testConfig()
	cfg.Entries = []config.Source{{Name: "feed", Type: "feed", Settings: map[string]any{}}} // guard off: the defaults hold a mass removal
	cfg.Memory.ReturnAfterQuiet = time.Second
	in, err := New(cfg, slog.New(slog.DiscardHandler), Build{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	f := <-feeds
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	defer func() { cancel(); <-done }()

	served := func(n int) func() bool {
		return func() bool { in.pub.mu.Lock(); defer in.pub.mu.Unlock(); return in.pub.why.count() == n }
	}
	const patience = time.Minute // a failure detector, not a measurement
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(patience)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s (reclaimer %+v)", what, patience, in.reclaim.Stats())
			}
			<-tick.C
		}
	}
	f.up <- sources.Update{Full: true, Services: manyServices(10000)}
	until("10,000 services served", served(10000))
	// The first state's own burst is decided on first: a quiet period
	// after it.
	s0 := in.reclaim.Stats().Samples
	until("the first state settled", func() bool { s := in.reclaim.Stats(); return s.Settled && s.Samples > s0+8 })
	before := in.reclaim.Stats().Releases

	f.up <- sources.Update{Full: true, Services: manyServices(6)}
	until("6 services served", served(6))
	until("memory returned after the shrink", func() bool { return in.reclaim.Stats().Releases > before })
}
