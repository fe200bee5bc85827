package consul

import (
	"context"
	"time"
)

// readGap is the spacing of reads for a rate (reads per second; 0 means
// unpaced).
func readGap(rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / rate)
}

// forgetIndexes makes the next read of every service acceptable whatever
// its index, after the datacenter's indexes went backwards.
func (d *dcState) forgetIndexes() {
	for _, st := range d.services {
		st.index = 0
	}
}

// markDirty queues a read of k that bypasses the agent cache.
func (l *loop) markDirty(k svcKey) {
	delete(l.viaCache, k)
	l.queueRead(k)
}

// markChanged queues a read of k for a check change at index: a read that
// may use the agent cache, and must answer at least index.
func (l *loop) markChanged(k svcKey, index uint64) {
	if !l.dirty[k] {
		l.viaCache[k] = true
	}
	l.want[k] = max(l.want[k], index)
	l.queueRead(k)
}

// promoteDue queues the delayed reads whose time has come.
func (l *loop) promoteDue() {
	now := time.Now()
	keep := l.later[:0]
	for _, d := range l.later {
		switch {
		case l.dcs[d.key.dc].services[d.key.name] == nil:
		case d.at.After(now):
			keep = append(keep, d)
		default:
			l.markDirty(d.key)
		}
	}
	l.later = keep
}

// queueRead queues a read of k unless one is queued already; a read in
// flight is repeated when it returns, because it may predate the change.
func (l *loop) queueRead(k svcKey) {
	if l.dirty[k] {
		return
	}
	l.dirty[k] = true
	if !l.inflight[k] {
		l.queue = append(l.queue, k)
	}
}

// dispatch starts queued reads while fewer than max_concurrent_fetches are
// in flight, spaced by max_read_rate when set.
func (l *loop) dispatch(ctx context.Context) {
	now := time.Now()
	if now.Before(l.fetchAt) {
		return
	}
	for len(l.inflight) < l.s.cfg.MaxConcurrentFetches && len(l.queue) > 0 {
		k := l.queue[0]
		st := l.dcs[k.dc].services[k.name]
		if !l.dirty[k] || l.inflight[k] || st == nil {
			l.queue = l.queue[1:]
			continue
		}
		if l.readGap > 0 {
			if now.Before(l.nextRead) {
				l.fetchAt = l.nextRead // arm wakes the loop then
				return
			}
			l.nextRead = now.Add(l.readGap)
		}
		l.queue = l.queue[1:]
		delete(l.dirty, k)
		cached := l.s.cfg.Cached && l.viaCache[k]
		delete(l.viaCache, k)
		l.inflight[k] = true
		l.seq++
		seq, dc := l.seq, l.dcs[k.dc].name
		l.wg.Go(func() {
			entries, index, err := l.s.fetch(ctx, l.c, dc, k.name, cached)
			if ctx.Err() != nil {
				return // shutting down: not a failure to report
			}
			send(ctx, l.results, fetchResult{key: k, st: st, seq: seq, entries: entries, index: index, err: err})
		})
	}
	if len(l.queue) == 0 {
		l.queue = nil // let the backing array go
	}
}
