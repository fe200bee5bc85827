package dns

import (
	"context"

	"github.com/xdsbridge/xdsbridge/sources"
)

// nameState is what the source knows of one entry.
type nameState struct {
	svc      sources.Service
	resolved bool // at least one successful lookup
	failing  bool // the last lookup failed
}

// merge owns the per-entry state: it records outcomes in the Status, and
// sends the Full update once every entry is resolved, then partial updates
// of the services that changed. Outcomes that are already waiting are
// folded into one update.
func (s *Source) merge(ctx context.Context, results <-chan outcome, up chan<- sources.Update) error {
	state := make([]nameState, len(s.entries))
	sentFull := false
	changed := map[int]bool{}
	for {
		select {
		case o := <-results:
			if s.apply(state, o) {
				changed[o.i] = true
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	drain:
		for {
			select {
			case o := <-results:
				if s.apply(state, o) {
					changed[o.i] = true
				}
			default:
				break drain
			}
		}
		s.recordStatus(state)

		var u sources.Update
		switch {
		case !sentFull:
			if !allResolved(state) {
				continue
			}
			u.Full = true
			for _, st := range state {
				u.Services = append(u.Services, st.svc.Clone())
			}
		case len(changed) == 0:
			continue
		default:
			for i := range state {
				if changed[i] {
					u.Services = append(u.Services, state[i].svc.Clone())
				}
			}
		}
		select {
		case up <- u:
			sentFull = true
			clear(changed)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// apply records one outcome and reports whether the service changed.
func (s *Source) apply(state []nameState, o outcome) bool {
	e := s.entries[o.i]
	st := &state[o.i]
	if o.err != nil {
		s.status.Failed(o.err)
		if !st.failing {
			s.log.Warn("DNS lookup failed; keeping the last good endpoints",
				"cluster", e.cluster, "name", e.name, "err", o.err)
		}
		st.failing = true
		return false
	}
	if st.failing {
		s.log.Info("DNS lookup recovered", "cluster", e.cluster, "name", e.name)
	}
	st.failing = false
	svc := sources.Service{Name: e.cluster, Endpoints: o.res.Endpoints}
	if st.resolved && st.svc.Equal(svc) {
		// The same answer again: what it dropped was counted when it came.
		return false
	}
	s.status.Dropped(o.res.Dropped)
	if o.res.Dropped > 0 {
		s.log.Warn("DNS records without usable endpoints dropped", "cluster", e.cluster, "name", e.name, "dropped", o.res.Dropped)
	}
	s.log.Debug("DNS lookup changed the service", "cluster", e.cluster, "endpoints", len(svc.Endpoints), "ttl", o.res.TTL)
	st.svc = svc
	st.resolved = true
	return true
}

// recordStatus marks the source succeeded while every entry is resolved
// and none is failing; failures are recorded as they happen (apply).
func (s *Source) recordStatus(state []nameState) {
	for _, st := range state {
		if !st.resolved || st.failing {
			return
		}
	}
	s.status.Succeeded()
}

func allResolved(state []nameState) bool {
	for _, st := range state {
		if !st.resolved {
			return false
		}
	}
	return true
}
