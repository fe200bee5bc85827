package fanout

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
)

// peakWatch samples the server's memory while a phase runs (a reconnect
// storm) and writes a heap profile each time the RSS reaches a new high,
// so that the profile left at the end is the one taken nearest the peak.
// What it logs per new high (RSS, heap in use, heap obtained from the OS,
// the next GC target) tells the heap apart from what the runtime keeps.
type peakWatch struct {
	stop chan struct{}
	done chan struct{}
}

// watchPeak starts sampling every interval; the profile goes to path.
func watchPeak(ctx context.Context, srv *xdsserver.Process, path string, log *slog.Logger) *peakWatch {
	const interval = 250 * time.Millisecond
	p := &peakWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		var high int64
		for {
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st, err := srv.Stats(ctx)
			if err != nil {
				continue
			}
			// A new high by at least 5%: profiles are not free, and the
			// last one written is what matters.
			if st.RSS <= high+high/20 {
				continue
			}
			high = st.RSS
			if err := srv.Post(ctx, "/heapprofile", url.Values{"path": {path}}); err != nil {
				log.Warn("peak heap profile", "err", err)
			}
			log.Info("memory high", "rss_mb", st.RSS>>20, "heap_inuse_mb", st.HeapInuse>>20,
				"heap_alloc_mb", st.HeapAlloc>>20, "heap_sys_mb", st.HeapSys>>20,
				"heap_released_mb", st.HeapReleased>>20, "next_gc_mb", st.NextGC>>20, "goroutines", st.Goroutines)
		}
	}()
	return p
}

// end stops the sampling and waits for it.
func (p *peakWatch) end() {
	close(p.stop)
	<-p.done
}
