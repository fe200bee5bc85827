// Package consul is the source of `type: consul`: it serves every selected
// Consul service as a cluster whose endpoints follow registrations and
// health checks. docs/consul.md is the user's guide: every key and its
// default, what the source costs Consul, its failures and its mapping.
// This comment is the design.
//
// # Following the catalog
//
// Consul has no feed of changes, only blocking queries, and each holds one
// of the connections the agent allows a client address (a stream over
// HTTP/2). So the source combines two ways of learning of a change:
//
//   - a blocking query per service (a watch) where connections allow: it
//     answers whatever the change, and costs a server nothing while idle
//     on a client agent with the streaming backend;
//   - three blocking queries per datacenter whatever the number of
//     services (catalog services, the checks that are not passing,
//     catalog nodes): what they attribute to a service (a new service, its
//     tags, one of its checks or nodes) queues a read of that service, and
//     for the rest (an instance added without checks, a new port) a
//     census of the catalog, or a sweep of the services' indexes, names
//     the services to read.
//
// Only successful answers change what is served, and an answer is compared
// by content: an index that moved without a change publishes nothing.
//
// # Parts
//
// Each part owns its state; a service's record in the catalog (svcState)
// holds what each part keeps about that service, so that removing a
// service is deleting its record.
//
//   - agentClient (client.go, requests.go) makes every request: the
//     transports, the token, each request's deadline and the generation it
//     runs under (generation.go), which a recovery or a new token renews.
//   - budgetShare (budget.go) is the source's share of the connection
//     budget of its agent, which the process's Consul sources at that
//     agent share (the old and new instances of a reload's replacement
//     among them): the plan (conns.go) divides the share, and every
//     connection is counted against the whole budget while it is open.
//   - agentMonitor (monitor.go) knows the agent: the probe finds a hung
//     agent (an idle source holds only blocking queries, which may rightly
//     stay silent) and paces an outage alone, every other request waiting
//     at the gate (gate.go); it records failures in the status, and notes
//     resets (Consul lost its state) and resumes (the agent answers again
//     with its state).
//   - poller (poll.go) holds one bulk blocking query, and for the catalog
//     query the censuses (census.go); signals (signals.go) applies their
//     answers to the catalog (catalog.go).
//   - readQueue (readqueue.go, retry.go, pacer.go) makes the reads of
//     single services: one lane per priority so that a read a signal asked
//     for goes ahead of a sweep's, the connection plan's slots
//     (conns.go), max_read_rate, the sweep pacer, and each failed read's
//     own backoff.
//   - watchSet (watchset.go, watch.go) gives the watches to the services
//     that changed last, on lanes that each hold one connection.
//   - sweeper (sweep.go) follows the services without a watch:
//     censuses, and sweeps where censuses cannot list the instances.
//   - publisher (publish.go) applies accepted answers to the records and
//     sends the source's updates: the first sync whole, then what changed.
//   - loop (loop.go) is the select that hands each event to its part and
//     then turns the parts once: it applies what the agent monitor noted,
//     offers the services read anew a watch, starts due reads and sweeps,
//     publishes, and refreshes the status.
//
// A read's answer stays with the read queue and the publisher: the read
// queue accepts it (or reads again when it is older than what is served,
// or behind the check change that asked for it), and the publisher serves
// it.
//
// # Failures
//
// A failure publishes nothing: the receiver keeps the last good state, and
// the status says the source is stale. Each failure is handled where it
// happens (one read retries alone, with its own backoff, so a 429 costs
// one read more, not a resync), and one owner paces an outage: while the
// probe fails, it alone asks the agent, backing off to a second, whatever
// the error looked like; a kick from a failed request brings a probe
// forward once and never makes it hot.
//
// Consul can lose its state under the source (a -dev agent or a server
// restarted without its data, a snapshot restored). The source does not
// guess which of the removals that follow are real: it marks its next
// update Reset, and the removal guard keeps the last good state until the
// refill settles. It takes an agent that went away and came back, a new
// node ID, or an index that went backwards for such a loss; after one,
// every blocking query and watch starts over from index 0 and no answer to
// an earlier request is applied. An agent that only stopped answering
// keeps its state: its return is a resume, not a reset.
package consul
