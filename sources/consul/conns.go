package consul

import "fmt"

// Connections. Every request holds an HTTP connection to the agent while
// it runs: over HTTP/1.1 one request per connection, over HTTP/2 (the
// agent's HTTPS listener) up to 250 streams on one. The agent accepts at
// most limits.http_max_conns_per_client connections from one client
// address and refuses more with a 429; every program on the host shares
// that allowance (consul-template, Nomad, scripts, the CLI), and so do
// the other source instances of the process at the same agent, with
// which the source shares one budget (budget.go). The source divides what
// it may hold (connPlan) between its reads, its bulk blocking queries,
// the probe, and the watches.

// pollsPerDatacenter is the number of blocking queries held per datacenter
// (catalog services, health state, catalog nodes).
const pollsPerDatacenter = 3

// probeConns is the connection the liveness probe needs (see monitor.go).
const probeConns = 1

// fixedConns is the number of connections the source holds whatever the
// reads: the blocking queries of n datacenters and the probe.
func fixedConns(n int) int { return pollsPerDatacenter*max(1, n) + probeConns }

// fallbackConns is the budget when the agent's limit is unknown: the
// reads, blocking queries and probe of one datacenter (12) and four
// watch connections.
const fallbackConns = 16

// consulDefaultConnsPerClient is Consul's default
// limits.http_max_conns_per_client.
const consulDefaultConnsPerClient = 200

// reserveDivisor: the source leaves 1/reserveDivisor of the agent's
// per-address limit to the other programs on the host.
const reserveDivisor = 4

// connPlan is how the source spends its connections, made once Run knows
// the agent's protocol and limit, and made again when the agent shows
// another limit or the source's share of its agent's budget changes
// (replan).
type connPlan struct {
	http2 bool
	// agentLimit is the agent's http_max_conns_per_client (0: unknown);
	// budget the connections the source may hold; derived: what it would
	// hold alone comes from agentLimit, not from max_connections; sharers
	// the instances the agent's budget is shared by (0: the source is
	// alone with its agent, see budget.go).
	agentLimit int
	budget     int
	derived    bool
	sharers    int
	// reads is how many non-blocking reads may be in flight; lanes the
	// connections that carry watches, perLane watches each.
	reads, lanes, perLane int
}

// alone is how many connections the source would hold with no other
// instance beside it at its agent: max_connections, else what the
// agent's limit (agentLimit, 0: unknown) leaves to the other programs on
// the host, else fallbackConns. derived says it did not come from
// max_connections.
func (c *Config) alone(agentLimit int) (budget int, derived bool) {
	switch {
	case c.MaxConnections > 0:
		return c.MaxConnections, false
	case agentLimit > 0:
		return max(c.floorConns(), agentLimit-agentLimit/reserveDivisor), true
	default:
		return fallbackConns, true
	}
}

// floorConns is the fewest connections the source works with: its
// blocking queries, the probe and one read.
func (c *Config) floorConns() int { return fixedConns(len(c.Datacenters)) + 1 }

// plan divides the connections of a source alone with its agent, which
// speaks HTTP/2 or not and allows agentLimit connections per client
// address (0: unknown).
func (c *Config) plan(http2 bool, agentLimit int) connPlan {
	return c.planShare(http2, agentLimit, share{})
}

// planShare divides the connections of sh, the source's share of its
// agent's budget (the zero share: what it would hold alone).
func (c *Config) planShare(http2 bool, agentLimit int, sh share) connPlan {
	p := connPlan{http2: http2, agentLimit: agentLimit, perLane: 1}
	p.budget, p.derived = c.alone(agentLimit)
	if sh.of > 1 {
		p.budget, p.sharers = sh.conns, sh.of
	}
	fixed := fixedConns(len(c.Datacenters))
	// Reads are lowered so that reads, blocking queries and the probe
	// together never need more than the budget.
	p.reads = max(1, min(c.MaxConcurrentFetches, p.budget-fixed))
	if c.Watch != nil && *c.Watch {
		if http2 {
			// Reads, blocking queries and the probe share one connection.
			p.lanes, p.perLane = max(0, p.budget-1), c.WatchesPerConnection
		} else {
			p.lanes = max(0, p.budget-p.mainConns(len(c.Datacenters)))
		}
	}
	return p
}

// mainConns is how many connections the reads, blocking queries and the
// probe of n datacenters may hold: over HTTP/2 they share one.
func (p connPlan) mainConns(n int) int {
	if p.http2 {
		return 1
	}
	return p.reads + fixedConns(n)
}

// capacity is how many services the plan can watch at once (before the
// agent shows a lower stream limit, see watchSet.room).
func (p connPlan) capacity() int { return p.lanes * p.perLane }

// String says how the connections are spent, for logs and the status.
func (p connPlan) String() string {
	proto := "HTTP/1.1"
	if p.http2 {
		proto = "HTTP/2"
	}
	from := "max_connections"
	switch {
	case p.derived && p.agentLimit > 0:
		from = fmt.Sprintf("3/4 of the agent's http_max_conns_per_client %d", p.agentLimit)
	case p.derived:
		from = "the agent's limit unknown"
	}
	if p.sharers > 1 {
		from = fmt.Sprintf("shared by %d source instances at this agent, of %s", p.sharers, from)
	}
	return fmt.Sprintf("%d connections over %s (%s): %d carry watches, room for %d services", p.budget, proto, from, p.lanes, p.capacity())
}

// msgPlan is logged with the connection plan.
const msgPlan = "consul connections"

// logPlan logs the connection plan, at startup and whenever it changes.
func (s *Source) logPlan() {
	s.log.Info(msgPlan, "plan", s.plan.String())
}
