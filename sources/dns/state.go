package dns

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// nameState is what the source knows of one entry.
type nameState struct {
	svc  sources.Service // as the last outcome applied has it
	sent sources.Service // as the last update that carried it had it
	// at is when the lookup of the last outcome applied began: an older
	// outcome (a confirmation round and the name's own refresh can cross)
	// is not applied over a newer one.
	at time.Time
	// needs is the round whose outcomes a darkening is reported with (see
	// confirm.go).
	needs    int
	resolved bool // at least one successful lookup
	failing  bool // the last lookup failed
}

// darkening reports whether the entry went dark since an update last
// carried it: the receiver has endpoints for it, the latest answer none.
func (st *nameState) darkening() bool {
	return len(st.sent.Endpoints) > 0 && len(st.svc.Endpoints) == 0
}

// merger is the state of one Run: what each entry has and what was sent.
type merger struct {
	s        *Source
	state    []nameState
	changed  map[int]bool // entries whose svc changed since an update carried them
	sentFull bool
	rounds   rounds
	// fails logs the lookups' failures: the server is the dependency,
	// so a failure of any name opens a failing period and its recovery
	// waits for every name.
	fails *sources.FailureLog
}

// merge owns the per-entry state: it records outcomes in the Status, and
// sends the Full update once every entry is resolved, then partial updates
// of the services that changed. Outcomes that are already waiting are
// folded into one update. A darkening waits for a confirmation round
// (confirm.go), which merge starts and whose outcomes it folds in.
func (s *Source) merge(ctx context.Context, r *resolver, results <-chan outcome, up chan<- sources.Update) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	m := &merger{s: s, state: make([]nameState, len(s.entries)), changed: map[int]bool{},
		rounds: rounds{every: s.cfg.Refresh.Min}, fails: &sources.FailureLog{Log: s.log,
			FailingMsg: "DNS lookups failing; keeping the last good endpoints", RecoveredMsg: "DNS lookups succeed again"}}
	// confirmed has room for the outcomes of the one round that runs at a
	// time, so that a round never waits for merge.
	confirmed := make(chan []outcome, 1)
	var wake <-chan time.Time // when a waiting round may start
	for {
		select {
		case o := <-results:
			m.apply(o)
		case outs := <-confirmed:
			m.finish(outs)
		case <-wake:
			wake = nil
		case <-ctx.Done():
			return ctx.Err()
		}
	drain:
		for {
			select {
			case o := <-results:
				m.apply(o)
			default:
				break drain
			}
		}
		m.recordStatus()

		round, idx, wait := m.nextRound(time.Now())
		switch {
		case len(idx) > 0:
			wg.Go(func() { s.confirm(ctx, r, round, idx, confirmed) })
		case !wait.IsZero() && wake == nil:
			wake = time.After(time.Until(wait))
		}

		u, sent := m.update()
		if sent == nil {
			continue
		}
		select {
		case up <- u:
			m.sent(sent)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// apply records one outcome in the entry's state, and reports whether it
// took the entry's last endpoints away.
func (m *merger) apply(o outcome) (dark bool) {
	st := &m.state[o.i]
	if !o.at.Before(st.at) {
		st.at = o.at
		wasLive := len(st.svc.Endpoints) > 0
		if m.record(st, o) {
			m.changed[o.i] = true
			if dark = wasLive && len(st.svc.Endpoints) == 0; dark {
				st.needs = m.rounds.started + 1
			}
		}
	}
	// A round that found the name dark too confirms its darkening, even
	// when the name's own refresh, applied first, began later.
	if o.round > 0 && o.err == nil && len(o.res.Endpoints) == 0 && len(st.svc.Endpoints) == 0 {
		st.needs = min(st.needs, o.round)
	}
	return dark
}

// finish applies the outcomes of the round that was running.
func (m *merger) finish(outs []outcome) {
	dark := 0
	for _, o := range outs {
		if m.apply(o) {
			dark++
		}
	}
	m.rounds.done = m.rounds.started
	if dark > 0 {
		m.s.log.Info("DNS confirmation found more names without endpoints; reporting them together",
			"round", m.rounds.done, "looked_up", len(outs), "dark", dark)
		return
	}
	m.s.log.Debug("DNS confirmation: the other names keep their endpoints", "round", m.rounds.done, "looked_up", len(outs))
}

// nextRound starts a confirmation round if a darkening waits for one and
// the rate allows it: it returns the round's number and the entries to
// look up (those with endpoints; none means the round is already done).
// When a round must wait, wait is when it may start.
func (m *merger) nextRound(now time.Time) (round int, idx []int, wait time.Time) {
	waiting := 0
	for i := range m.changed {
		if st := &m.state[i]; st.darkening() && st.needs > m.rounds.done {
			waiting++
		}
	}
	if waiting == 0 {
		return 0, nil, time.Time{}
	}
	ok, wait := m.rounds.due(now)
	if !ok {
		return 0, nil, wait
	}
	for i := range m.state {
		if len(m.state[i].svc.Endpoints) > 0 {
			idx = append(idx, i)
		}
	}
	round = m.rounds.start(now, len(idx))
	m.s.log.Debug("DNS names went dark; looking up the names with endpoints again before reporting them",
		"round", round, "dark", waiting, "names", len(idx))
	return round, idx, time.Time{}
}

// update returns the update to send and the entries it carries (nil when
// there is nothing to send): the Full update once every entry is
// resolved, then the changed entries, less the darkenings that wait for
// a round.
func (m *merger) update() (u sources.Update, sent []int) {
	if !m.sentFull {
		if !allResolved(m.state) {
			return u, nil
		}
		u.Full = true
		for i := range m.state {
			sent = append(sent, i)
			u.Services = append(u.Services, m.state[i].svc.Clone())
		}
		return u, sent
	}
	for _, i := range slices.Sorted(maps.Keys(m.changed)) {
		st := &m.state[i]
		switch {
		case st.darkening() && st.needs > m.rounds.done:
		case st.svc.Equal(st.sent):
			delete(m.changed, i) // changed and changed back while it waited
		default:
			sent = append(sent, i)
			u.Services = append(u.Services, st.svc.Clone())
		}
	}
	return u, sent
}

// sent records that an update carrying the entries idx was sent.
func (m *merger) sent(idx []int) {
	m.sentFull = true
	for _, i := range idx {
		m.state[i].sent = m.state[i].svc
		delete(m.changed, i)
	}
}

// record applies one outcome to st and reports whether the service
// changed.
func (m *merger) record(st *nameState, o outcome) bool {
	s := m.s
	e := s.entries[o.i]
	if o.err != nil {
		s.status.Failed(o.err)
		m.fails.Failed(o.err, "cluster", e.cluster, "name", e.name)
		if !st.failing {
			s.log.Debug("DNS lookup failed", "cluster", e.cluster, "name", e.name, "err", o.err)
		}
		st.failing = true
		return false
	}
	if st.failing {
		s.log.Debug("DNS lookup recovered", "cluster", e.cluster, "name", e.name)
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
// and none is failing, and logs a recovery once none is failing; failures
// are recorded as they happen (record).
func (m *merger) recordStatus() {
	resolved := true
	for _, st := range m.state {
		if st.failing {
			return
		}
		resolved = resolved && st.resolved
	}
	m.fails.Recovered()
	if resolved {
		m.s.status.Succeeded()
	}
}

func allResolved(state []nameState) bool {
	for _, st := range state {
		if !st.resolved {
			return false
		}
	}
	return true
}
