package consul

import (
	"slices"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// dcFailing reports whether a blocking query of datacenter dc fails (one
// of its bulk queries or a watch).
func (l *loop) dcFailing(dc int) bool {
	for k := range l.pollErr {
		if k[0] == dc {
			return true
		}
	}
	return l.w.failedDC[dc] > 0
}

// holding reports whether removals in datacenter dc are held back: while
// its blocking queries fail, and for resync_grace after they answer again.
func (l *loop) holding(dc int) bool {
	return l.dcFailing(dc) || time.Now().Before(l.dcs[dc].graceUntil)
}

// endGraces ends the resync graces that are over: services still absent
// from the catalog are removed, watched services serving held instances
// are read again, and the services without a watch are swept, so that
// what the grace held back is applied.
func (l *loop) endGraces() {
	now := time.Now()
	for i, d := range l.dcs {
		if d.graceUntil.IsZero() || now.Before(d.graceUntil) {
			continue
		}
		d.graceUntil = time.Time{}
		for name, st := range d.services {
			switch k := (svcKey{i, name}); {
			case st.absent:
				l.removeService(k)
			case st.held && l.watched(k):
				// Its watch will not answer again without a change.
				l.markDirty(k)
			}
		}
		if l.unwatched(i) {
			l.sweepWanted[i] = true
			l.nextSweep = time.Time{}
		}
	}
}

// keepMissing adds to eps the endpoints of old whose address and port eps
// lacks: what a read during a resync grace may not remove yet.
func keepMissing(eps, old []sources.Endpoint) []sources.Endpoint {
	type ap struct {
		addr string
		port uint32
	}
	have := make(map[ap]bool, len(eps))
	for _, e := range eps {
		have[ap{e.Address, e.Port}] = true
	}
	added := false
	for _, e := range old {
		if !have[ap{e.Address, e.Port}] {
			eps = append(eps, e)
			added = true
		}
	}
	if added {
		slices.SortFunc(eps, sources.Endpoint.Compare)
	}
	return eps
}
