package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// supervise runs n's source until ctx is done. A Run that returns while ctx
// is still live is a failure: it is recorded in the source's Status and
// followed by a restart after the source's backoff (restartMin doubling to
// restartMax, with jitter); a source that ran for longer than restartMax
// before failing starts over from restartMin. The failures are logged by
// the house rule: the first, then at most once a minute with a count, and
// the recovery once, when a restarted source has kept running for
// restartMax. The services the source reported stay in the merged state
// meanwhile; the restarted source's first (Full) update replaces them.
func (m *Manager) supervise(ctx context.Context, n Named, up chan<- sources.Update) {
	log := m.log.With("source", n.Name)
	bo := sources.Backoff{Min: m.restartMin, Max: m.restartMax}
	fails := sources.FailureLog{Log: log, Level: slog.LevelError, FailingMsg: "source stopped; restarting",
		RecoveredMsg: "restarted source keeps running"}
	for {
		started := time.Now()
		recovered := time.AfterFunc(m.restartMax, func() { fails.Recovered() })
		err := n.Source.Run(ctx, up)
		recovered.Stop()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("returned before shutdown")
		}
		err = fmt.Errorf("running source %q: %w", n.Name, err)
		if time.Since(started) > m.restartMax {
			bo.Reset()
		}
		delay := bo.Next()
		fails.Failed(err, "after", delay)
		if n.Status != nil {
			n.Status.Failed(err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
