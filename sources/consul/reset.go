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
//   - the agent answers again after the probe found it down (no answer,
//     or no leader): an agent that was away may come back with any state,
//     and a -dev agent restarted on its old data directory keeps its node
//     ID while its catalog starts empty;
//   - the agent's node ID changed (/v1/agent/self, read at startup and
//     again after any request failed without an HTTP answer): an agent
//     started on an empty data directory gets a new one, and an address
//     that leads to another agent shows one. Consul 1.14 reports no start
//     time or incarnation of the agent; the node ID is what identifies it.

// agentState is what the loop knows of the agent between resets.
type agentState struct {
	phase agentPhase
	// reset: why Consul lost its state, until the update that says so
	// went out; empty when no reset is pending.
	reset string
	// nodeID: the agent's node ID, when known.
	nodeID string
}

// agentPhase is what the probe and the answers of the other requests tell
// of the agent:
//
//	agentUp    the probe answers (or has not failed yet): reads start,
//	           watches ask, the probe asks every read_timeout/2.
//	agentDown  the probe failed and nothing answered since: no read
//	           starts, watches wait, the probe asks every
//	           probeFailingInterval. An agent that was away may come back
//	           with any state: the next answer of any request is a reset.
//	agentBack  something answered after agentDown (the reset is noted),
//	           the probe not yet: reads and watches still wait for it.
//
// The transitions (agentSteps; stepAgent makes them all):
//
//	probe fails      any phase  -> agentDown
//	probe answers    any phase  -> agentUp    (from agentDown: a reset)
//	other answer     agentDown  -> agentBack  (a reset)
//
// The loop's other flags about failures change independently of the
// phase, so they stay flags: failing (a failing period was logged) is set
// by every failure, with an HTTP answer or not, and ends once nothing
// fails; rewake (a renewal is owed to the next good probe) is set by every
// request left without an answer, also while the probe answers, and paid
// by any renewal, also one for a new token while the agent is down;
// leaderless is what the latest answer said of the leader. synced (the
// first update went out) and confirmNext (the kind of the next sweep) are
// not about the agent at all.
type agentPhase uint8

const (
	agentUp agentPhase = iota
	agentDown
	agentBack
)

// agentEvent moves the agent's phase.
type agentEvent uint8

const (
	probeFailed agentEvent = iota
	probeAnswered
	otherAnswer // any other request was answered
)

var agentSteps = [...][3]agentPhase{
	//         probeFailed, probeAnswered, otherAnswer
	agentUp:   {agentDown, agentUp, agentUp},
	agentDown: {agentDown, agentUp, agentBack},
	agentBack: {agentDown, agentUp, agentBack},
}

// stepAgent moves the agent's phase on e, notes a reset when it leaves
// agentDown, and shows any phase but agentUp to the goroutines that must
// not ask while the agent is away (the probe's pace, the watches).
func (l *loop) stepAgent(e agentEvent) {
	from := l.agent.phase
	l.agent.phase = agentSteps[from][e]
	l.probeFailing.Store(l.agent.phase != agentUp)
	if from == agentDown && l.agent.phase != agentDown {
		l.noteReset("the agent answers again after an outage")
	}
}

// noteReset records that Consul lost its state since the source last read
// it: the next update carries Reset. Every service is read again and
// watched from there, and the blocking queries start over from index 0:
// a query blocked on an index of the old state would wait out its wait.
// The first answer of each blocking query after it may show an index lower
// than before: that is this reset, not another (owesReset).
func (l *loop) noteReset(why string) {
	if l.agent.reset == "" {
		l.s.log.Info(msgReset, "why", why)
	}
	l.agent.reset = why
	for i, d := range l.dcs {
		d.forgetIndexes()
		l.stopWatches(i)
		d.owesReset = [pollKinds]bool{true, true, true}
	}
	l.s.gen.restart()
}

// answered records a successful answer from the agent (not the probe's).
func (l *loop) answered() { l.stepAgent(otherAnswer) }

// noteIdentity compares the node ID of the agent with the one it had.
func (l *loop) noteIdentity(id string) {
	if id == "" {
		return // unknown (no agent:read): nothing to compare
	}
	if l.agent.nodeID != "" && id != l.agent.nodeID {
		l.noteReset(fmt.Sprintf("the agent's node ID changed from %s to %s", l.agent.nodeID, id))
	}
	l.agent.nodeID = id
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
