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
	// down: the probe found the agent down, and nothing answered since.
	down bool
	// reset: why Consul lost its state, until the update that says so
	// went out; empty when no reset is pending.
	reset string
	// nodeID: the agent's node ID, when known.
	nodeID string
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

// answered records a successful answer from the agent; the first after the
// probe found the agent down is a reset.
func (l *loop) answered() {
	if l.agent.down {
		l.agent.down = false
		l.noteReset("the agent answers again after an outage")
	}
}

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
