package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// supervise runs n's source until ctx is done. A Run that returns while ctx
// is still live is a failure: it is logged, recorded in the source's Status
// and followed by a restart after an exponential backoff with jitter. The
// services the source reported stay in the merged state meanwhile; the
// restarted source's first (Full) update replaces them.
func (m *Manager) supervise(ctx context.Context, n Named, up chan<- sources.Update) {
	log := m.log.With("source", n.Name)
	backoff := m.restartMin
	for {
		started := time.Now()
		err := n.Source.Run(ctx, up)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("returned before shutdown")
		}
		err = fmt.Errorf("running source %q: %w", n.Name, err)
		// A source that ran for a good while before failing starts over
		// from the shortest backoff.
		if time.Since(started) > m.restartMax {
			backoff = m.restartMin
		}
		delay := sources.Jitter(backoff)
		log.Error("source stopped; restarting", "err", err, "after", delay)
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
		backoff = min(2*backoff, m.restartMax)
	}
}
