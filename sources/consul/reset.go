package consul

import (
	"fmt"
	"maps"
	"slices"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Resets. Consul can lose its state under the source: a -dev agent or a
// server restarted without its data, a snapshot restored, a cluster
// rebuilt. It then answers with less than before and fills up again as
// registrations come back, at whatever pace they come. The source does not
// guess which of the removals that follow are real: it reports what Consul
// says, and marks the first update after it noticed the loss with
// sources.Update.Reset, so that the removal guard keeps serving the last
// good state until the refill has settled. It notices a loss when:
//
//   - a blocking query's index goes backwards (poll.go);
//   - the agent answers again after it went away (its connections were
//     refused or cut: see wentAway): an agent that was away may come back
//     with any state, and a -dev agent restarted on its old data directory
//     keeps its node ID while its catalog starts empty;
//   - the agent's node ID changed (/v1/agent/self, read at startup and
//     again by the probe, see monitor.go): an agent started on an empty
//     data directory gets a new one, and an address that leads to another
//     agent shows one. Consul 1.14 reports no start time or incarnation of
//     the agent; the node ID is what identifies it.
//
// An agent that only stopped answering for a while (hung, partitioned, no
// leader, a certificate the source does not trust) and answers again is
// the same agent with its state: that is a resume, not a reset (resume),
// unless its indexes went backwards meanwhile.

// agentState is the loop's view of the agent, fed by the probe.
type agentState struct {
	phase agentPhase
	// gone: during the current outage a request showed the agent's
	// process gone (wentAway).
	gone bool
	// reset: why Consul lost its state, until the update that says so
	// went out; empty when no reset is pending.
	reset string
	// nodeID: the agent's node ID, when known.
	nodeID string
}

// agentPhase is what the probe tells of the agent:
//
//	agentUp    the probe answers (or has not failed yet): reads start,
//	           blocking queries and watches ask (the gate is open).
//	agentDown  the probe failed and has not answered since: the probe
//	           alone asks (the gate is shut).
type agentPhase uint8

const (
	agentUp agentPhase = iota
	agentDown
)

// agentChange is what a probe's outcome changes for the other requests.
type agentChange uint8

const (
	agentSame agentChange = iota
	// agentLost: the agent stopped answering.
	agentLost
	// agentResumed: it answers again after an outage, with its state.
	agentResumed
	// agentReset: it lost its state (it went away and came back, or
	// another agent answers).
	agentReset
)

// onProbe moves the agent's phase on a probe's outcome and says what
// changed, and why when it is a reset.
func (a *agentState) onProbe(r probeResult) (agentChange, string) {
	if r.err != nil {
		a.gone = a.gone || r.gone
		if a.phase == agentDown {
			return agentSame, ""
		}
		a.phase = agentDown
		return agentLost, ""
	}
	change, why := agentSame, ""
	if a.phase == agentDown {
		a.phase, change = agentUp, agentResumed
		if a.gone {
			change, why = agentReset, "the agent answers again after it went away"
		}
		a.gone = false
	}
	if id := r.nodeID(); id != "" {
		if a.nodeID != "" && id != a.nodeID {
			change, why = agentReset, fmt.Sprintf("the agent's node ID changed from %s to %s", a.nodeID, id)
		}
		a.nodeID = id
	}
	return change, why
}

// nodeID is the agent's node ID the probe read, if it read one.
func (r probeResult) nodeID() string {
	if r.self == nil {
		return ""
	}
	return r.self.nodeID
}

// onProbe applies a probe's outcome: the gate follows the agent's phase,
// and its return is a resume or a reset.
func (l *loop) onProbe(r probeResult) {
	change, why := l.agent.onProbe(r)
	switch change {
	case agentLost:
		l.s.gate.shut()
	case agentResumed:
		l.resume()
	case agentReset:
		l.noteReset(why)
	}
	if r.err != nil {
		l.fail(r.err)
		return
	}
	l.s.gate.reopen()
	if r.self != nil {
		l.replan(r.self.maxConnsPerClient)
	}
}

// answered notes an answer of the agent to a request other than the
// probe's, and reports whether the answer must be dropped. While the probe
// finds down an agent that went away, an answer (to a request that slipped
// past the gate as it shut) is the first sign that the agent is back, with
// whatever state: the reset is noted before anything of that state is
// applied, and the answer, asked before the reset, is asked again.
func (l *loop) answered() (drop bool) {
	if l.agent.phase != agentDown || !l.agent.gone {
		return false
	}
	l.agent.gone = false
	l.noteReset("the agent answers again after it went away")
	return true
}

// resume: the agent answers again after an outage, with its state.
// Requests stuck on connections of the failed period are cut and asked
// again, the blocking queries from index 0 (see queryMarks); every read
// waiting for its backoff is due now; watches ask again from where they
// were (a change during the outage answers at once); and every unwatched
// service is swept, for the changes no bulk query attributes.
func (l *loop) resume() {
	l.s.gen.resume()
	l.retryNow()
	for i := range l.dcs {
		if l.unwatched(i) {
			l.sweepWanted[i] = true
		}
	}
}

// noteReset records that Consul lost its state since the source last read
// it: the next update carries Reset. The blocking queries start over from
// index 0 (a query blocked on an index of the old state would wait out its
// wait), every watch too, every unwatched service is read again, and what
// was asked before the reset is not applied (epoch).
func (l *loop) noteReset(why string) {
	if l.agent.reset == "" {
		l.s.log.Info(msgReset, "why", why)
	}
	l.agent.reset = why
	l.epoch = l.s.gen.restart()
	for _, d := range l.dcs {
		for _, st := range d.services {
			st.index, st.peekIndex, st.want, st.behind = 0, 0, 0, 0
			if st.watch != nil {
				l.stopWatch(st)
				l.maybeWatch(st, false)
			} else {
				l.markDirty(st)
			}
		}
	}
	l.retryNow()
}

// fullUpdate builds the source's complete state, records it as
// published, and returns it as a Full update.
func (l *loop) fullUpdate() sources.Update {
	names := make(map[string]bool, len(l.members)+len(l.published))
	for name := range l.members {
		names[name] = true
	}
	for name := range l.published {
		names[name] = true
	}
	u := sources.Update{Full: true}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if svc, keep := l.build(name); keep {
			l.published[name] = svc
			u.Services = append(u.Services, svc.Clone())
		} else {
			delete(l.published, name)
		}
	}
	clear(l.changed)
	return u
}

// keepMissing adds to eps the endpoints of old whose address and port eps
// lacks: what an answer with results hidden by ACLs may not remove.
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
