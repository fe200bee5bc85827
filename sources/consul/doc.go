// Package consul is the source of `type: consul`: it serves every selected
// Consul service as a cluster whose endpoints follow registrations and
// health checks.
//
// # Configuration
//
// The keys and their defaults (see Config for each key's meaning):
//
//	sources:
//	  - name: consul
//	    type: consul
//	    address: 127.0.0.1:8500          # $CONSUL_HTTP_ADDR, else 127.0.0.1:8500
//	    scheme: http                     # https with CONSUL_HTTP_SSL=true or when address starts with https://
//	    token_file: /run/secrets/consul  # or token; default $CONSUL_HTTP_TOKEN_FILE, else $CONSUL_HTTP_TOKEN
//	    tls: {ca_file: "", ca_path: "", cert_file: "", key_file: "", server_name: "", insecure_skip_verify: false}
//	    datacenters: [dc1]               # default: the agent's own; failover order
//	    datacenter_priority: {}          # e.g. {dc3: 1}: dc3 shares priority 1 with dc2
//	    namespace: ""                    # Enterprise
//	    partition: ""                    # Enterprise
//	    services: {include: ["*"], exclude: []}   # path.Match globs
//	    tags: []                         # tags every served instance carries
//	    node_meta: {}                    # node metadata every served node has
//	    filter: ""                       # Consul filter on /v1/health/service
//	    address_source: service          # service | node | a tagged address name
//	    warning: healthy                 # healthy | degraded
//	    keep_mesh: false                 # serve proxies, gateways and the consul service too
//	    critical: unhealthy              # unhealthy | drop
//	    locality: {region_key: "", zone_key: "", subzone_key: ""}
//	    cluster_name: "{{.Service}}"     # also .Datacenter, .Namespace, .Partition
//	    on_empty: empty                  # empty | remove
//	    stale: true
//	    max_stale: 10s                   # older stale answers are read again from the leader
//	    cached: false
//	    sweep_cached: true                # sweeps read the agent cache (no server reads on a client agent)
//	    wait: 5m
//	    max_concurrent_fetches: 8
//	    max_read_rate: 0                 # reads per second; 0: no pacing
//	    max_connections: 0               # all connections to the agent; 0: 3/4 of the agent's http_max_conns_per_client
//	    watch: true                      # a blocking query per service, as connections allow
//	    watches_per_connection: 200      # over HTTP/2
//	    retry_min: 250ms
//	    retry_max: 30s
//	    read_timeout: 5s                 # deadline of a read; blocking: wait + wait/16 + this
//
// The consul CLI's environment variables that apply to reading the catalog
// fill the keys an entry leaves out; a key the entry sets wins over its
// variable, and a variable wins over the default: CONSUL_HTTP_ADDR
// (address), CONSUL_HTTP_TOKEN_FILE (token_file), CONSUL_HTTP_TOKEN (token;
// neither token variable applies when the entry sets token or token_file,
// and the file's wins over the token's), CONSUL_HTTP_SSL (true: scheme
// https), CONSUL_HTTP_SSL_VERIFY (false: tls.insecure_skip_verify),
// CONSUL_CACERT (tls.ca_file), CONSUL_CAPATH (tls.ca_path),
// CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY (tls.cert_file, tls.key_file),
// CONSUL_TLS_SERVER_NAME (tls.server_name), CONSUL_NAMESPACE (namespace)
// and CONSUL_PARTITION (partition). Paths in variables are relative to the
// working directory, as for the consul CLI; paths in the configuration
// are relative to its file. An error in a value taken from a variable
// names the variable. CONSUL_HTTP_AUTH is not read.
//
// # Watching, and what it costs Consul
//
// The source learns of changes in two ways: a blocking query per service
// where connections allow (watches), and three bulk blocking queries per
// datacenter for the rest.
//
// Connections. Every request holds an HTTP connection to the agent while
// it runs, and the agent accepts at most limits.http_max_conns_per_client
// (200 by default) from one client address, shared by every program on
// the host (consul-template, Nomad, scripts, the CLI); beyond it, a 429.
// The source reads that limit from /v1/agent/self (DebugConfig) at
// startup and takes three quarters of it, leaving a quarter to the
// others: 150 connections by default, 16 when the agent does not say (a
// token without agent:read). max_connections, when set, is the budget
// instead. The startup log gives the plan ("consul connections").
//
// Watches. A blocking query on /v1/health/service/<name> answers when
// anything of that service changes: an instance added or removed with or
// without checks, a port or address re-registered, a check or maintenance
// flip. Each watched service holds one, started once the service has been
// read, at the index of that read. They ride on the connections the
// budget leaves once reads, bulk queries and the probe have theirs
// ("lanes", each its own transport holding one connection):
//
//   - Over HTTPS the agent speaks HTTP/2 (the source checks the answer's
//     protocol once at startup). Reads, bulk queries and the probe then
//     share one connection, and each other connection carries up to
//     watches_per_connection (200) watches as streams; the agent allows
//     250 streams per connection (Go's default, which Consul keeps). Go's
//     HTTP/2 client would open another connection whenever one carries the
//     server's stream limit; each lane is strict instead, and lanes fill in
//     order, so the source opens only the connections its watches need:
//     10,000 services on 51 connections. A server allowing fewer streams
//     (a proxy in front of the agent: nginx allows 128) would leave the
//     watches beyond its limit waiting for a stream, watching nothing: a
//     watch whose request is not sent within four read_timeouts is given
//     up, every lane's room becomes the most requests one connection has
//     been seen carrying (each connection to the server has the same
//     limit), the service moves to the next lane with room, and a
//     warning is logged once.
//   - Over HTTP/1.1 (plain HTTP) each blocking query holds a connection:
//     reads, bulk queries and the probe hold max_concurrent_fetches + 3
//     per datacenter + 1 (12 for one datacenter), and each of the others
//     carries one watch: 138 by default.
//
// When there are more services than room, the room goes to the services
// that changed last: a service whose change a sweep or a signal found
// takes the watch of the watched service that has gone longest without a
// change, if that was more than 5s ago. The status says how many of how
// many services are watched, how long the last sweep of the others took,
// and, over plain HTTP with services left unwatched, what to change
// ("watches" note in /sources; the startup log says so too, and bridge
// validate when max_connections leaves less room than the default).
//
// What a watch costs Consul: on a client agent with the streaming backend
// (the default of client agents since Consul 1.10), a blocking health
// query is served from the agent's materialized view of that service, fed
// by one subscription to the servers: an idle watch costs the servers
// nothing, and a change costs them one event sent to the agent, not a
// read. On a server agent (or a -dev agent) a watch is a blocking query on
// the local state store. On a client agent without streaming
// (use_streaming_backend = false) each watch is a blocking RPC held on a
// server, which runs the query again on each change of that service: the
// cost consul-template and Prometheus' Consul discovery put on servers;
// set watch: false there if the servers are short of memory.
//
// Bulk queries. Three blocking queries per datacenter, whatever the
// number of services, the other two asked at most 20 times a second:
//
//   - /v1/catalog/services (names and tags): services that appear, vanish or
//     change tags; asked at most 4 times a second (each answer lists every
//     service, and its index moves on every registration anywhere);
//   - /v1/health/state/any, filtered to the checks that are not passing:
//     the services whose check status changed (a node check names every
//     service with an instance on that node). Its index moves on every
//     check change while its answer stays small in a healthy cluster; a
//     check missing from it is passing;
//   - /v1/catalog/nodes: nodes whose address or meta changed, and nodes
//     that appeared: the services of a new node are read once from
//     /v1/catalog/node-services/<node> (up to 8 new nodes per answer), so
//     an instance on a new machine or sync node is found without a sweep.
//
// Censuses. While some services of a datacenter have no watch, the
// catalog query, after its index moved, takes a census: one non-blocking
// read of every node with its instances and checks
// (/v1/internal/ui/nodes, which the agent's web UI reads), compared with
// the previous census; a service with an instance or check that appeared,
// vanished or changed (its ModifyIndex moved: a new port or address) is
// read. Censuses are taken at most once a second, and spaced further so
// that the agent spends at most a fifth of the time answering them (the
// time to the first byte of the last answer): a larger catalog is
// censused less often. Should the agent refuse that listing (it is not
// part of the documented API), censuses list every check instead
// (/v1/health/state/any, unfiltered), which still names a service whose
// instance with checks was added or removed, and sweeps find the rest.
//
// When one of them (or a census) names a service that has no watch, the
// source reads that service once, non-blocking, with
// /v1/health/service/<name>, at most max_concurrent_fetches (default 8)
// reads at a time (and, with max_read_rate, at most that many per
// second), and compares the result by content: an index bump without a real change publishes nothing.
// (A watched service is not read: its watch answers with the change; node
// changes are the exception, since they do not move a service's index on
// a server agent, and are read.)
// A read queued by a check change must answer at least that check's
// ModifyIndex (Consul bumps a service's index with its checks'); a read
// that answers below it came from a lagging server (stale reads) or the
// agent cache (cached: true, used only for such reads) and is repeated
// after 50ms, up to 20 times. A read older than the one applied last (its
// index is lower: a stale read from another server) is not served but
// repeated likewise, and accepted only if it stays older (the cluster's
// state was reset; once the source noticed a reset, see "When Consul
// loses its state", any index is acceptable at once).
//
// Reads queued by a precise signal (a check change, a new service, a
// node change, a census, a retry) go ahead of the reads of a sweep: one queue per
// priority, each service queued once.
//
// Sweeps. When censuses cannot list the instances (see Censuses) or
// ACLs filtered the listing, one kind of change on an unwatched service
// has no bulk signal: a registration that changes neither the list of
// names and tags, nor any non-passing check, nor the set of checks (an
// instance without checks added or removed, a new port or address). The
// index of /v1/catalog/services moves, but nothing says which service
// moved. The source then sweeps the services of that datacenter that have
// no watch, in the same order each time: it peeks at each, asking only
// for its index (the health query with a filter that matches no instance,
// answered "[]" with the service's X-Consul-Index), and reads in full, at
// change priority, those whose index moved; when every service is watched
// there is nothing to sweep. Sweep reads run two at a time and are paced
// so that their round trips add up to at most a fifth of the time: on
// loopback a round trip is the agent's work plus the transport's, so this
// bounds from above what sweeps cost the local agent, follows how fast the
// agent is, and slows sweeps down when the agent or its host is busy. With
// sweep_cached (the default) peeks carry ?cached: on a client agent with
// the streaming backend the agent answers from its materialized views (a
// view per service for peeks, another for full reads: one more streaming
// subscription per service to the servers), so a sweep costs the agent's
// CPU and no server read; on a server agent, or a client without
// streaming, the agent cache keeps a background blocking query per
// service it answered, in the agent's process. The cache follows the
// servers by milliseconds, so a cached sweep that finds nothing is
// repeated once. Cached sweeps follow each other as long as the catalog
// moves; with sweep_cached: false every peek reaches a server, and a sweep
// that took d is followed by a pause of 4d. A change without a bulk
// signal on an unwatched service is thus served within one to two sweeps
// (a change just behind a running sweep waits for the next).
//
// What a registry change costs the servers is a constant: the bulk
// queries answering and, for unwatched services, the full reads of what
// moved; nothing reads every service per change (a census lists every
// instance, but at most once a second however many changes it covers). The figures, watched and
// swept, over HTTP/2 and plain HTTP, are in docs/benchmarks.md ("Consul
// source").
//
// Consul's index rules are followed for every blocking query: an unchanged
// index means the wait timed out (ask again); an index that went backwards
// is a reset (see Failures); after an error the index restarts from 0 (the
// agent may have come back with fresh state).
//
// # Failures
//
// A failed read (agent unreachable, 5xx such as "No cluster leader", 429,
// 403, malformed JSON, no answer within its deadline) publishes nothing:
// the receiver keeps the last good state. The source records it in its
// Status (stale, with the error naming the read and why), and logs once
// when the failing period starts, once a minute while it lasts (with the
// number of failures), and once when it ends. Failures are handled where
// they happen:
//
//   - A failed read of one service is retried alone, with exponential
//     backoff and jitter (retry_min to retry_max) of its own, which only
//     its own success resets. It causes no other read: a 429 costs one
//     read more, not a resync.
//   - A failed blocking query backs off likewise and restarts from index
//     0; an answer at the index it saw last is no change, a higher one is
//     diffed as any answer, a lower one is a reset (below).
//   - A failed watch backs off likewise, on its own, and asks again from
//     index 0 (an immediate read); until it answers the source is stale.
//   - Every request has a deadline: read_timeout (5s) for reads, wait +
//     wait/16 (Consul's jitter) + read_timeout for blocking queries. A
//     request past it is a failure like any other; a hung agent cannot
//     freeze the source silently. This includes /v1/agent/self at
//     startup, retried with a backoff capped at 1s.
//   - A probe asks /v1/status/leader every read_timeout/2 while the agent
//     answers (an idle source holds only blocking queries, which may
//     rightly stay silent): a hung agent makes the source stale within 1.5
//     read_timeout. A request that fails without an HTTP answer brings
//     the next probe forward once. While the probe fails, it alone asks
//     the agent, with a backoff of its own from 200ms to 1s (each probe
//     with a 500ms deadline), whatever the failure looks like (refused,
//     cut, timed out, an untrusted certificate, no leader): no read,
//     blocking query or watch asks meanwhile, so an agent that is gone
//     costs about one request a second. Once the probe answers, requests
//     in flight are cut (they may hang on connections of the failed
//     period) and asked again, the blocking queries from index 0, with
//     every pending retry, so a returning agent is noticed within about a
//     second instead of a 30s backoff; the watches ask again, and the
//     services without one are swept. A probe costs the servers one
//     Status.Leader RPC, which reads no state: 24 a minute.
//   - token_file is read again every 500ms and after any 403; a new token
//     applies to the next request and makes every failed read due at once,
//     so a token rotated by Vault Agent or consul-template is picked up
//     without a restart. An unreadable or empty file keeps the current
//     token. The agent's configuration is read again with the new token:
//     a connection limit the old token could not read makes a new plan.
//
// Only successful reads change what is served, so while one datacenter
// fails the others' changes still flow.
//
// # When Consul loses its state
//
// A -dev agent or a server restarted without its data, a snapshot
// restored, a cluster rebuilt: Consul then answers with less than before
// and fills up again as registrations come back, in seconds or in
// minutes. The source does not guess which of the removals that follow
// are real. It reports what Consul says, and marks the first update after
// it noticed the loss (sources.Update.Reset; that update is the whole
// state, so that it goes out at once): the removal guard then keeps
// serving the last good state until the refill has settled, while every
// addition and change flows. It notices the loss when a blocking query's
// index goes backwards, when the agent answers again after it went away
// (its connections were refused or cut: an agent that was away may come
// back with any state, and a -dev agent restarted on its old data
// directory keeps its node ID while its catalog starts empty), and when
// the agent's node ID changes (/v1/agent/self, read after any request
// failed without an HTTP answer, and every twelfth probe; Consul 1.14
// reports no start time, and an agent started on an empty data directory
// gets a new node ID). After a reset every service is read again, every
// blocking query and every watch starts over from index 0, and no answer
// to a request asked before it is applied. A client agent's view of a
// service (its streaming backend) can hold the lost state for a while
// after the servers lost it, with indexes the new state has not reached:
// after a reset, a watch checks its answers against a read from the
// servers until one is not ahead of them. An agent that only stopped
// answering for a while (hung, no leader, an untrusted certificate) and
// answers again with indexes that did not go backwards has kept its
// state: that is no reset. Nor is a failed read that is not an outage (a
// 429, a 500 from a leader election, a 403).
//
// resync_grace, the source's own hold of removals after Consul answered
// again, is gone: the guard holds what the refill has not brought back,
// however long the refill takes. A configuration that names the key still
// loads, with a warning: it only ever delayed removals.
//
// # Mapping
//
// The address follows address_source: "service" (default; the service
// address, else the node address), "node", or a tagged address name such as
// lan_ipv4 or wan (the service's tagged address and its port, else the
// node's, else as for "service"). Instances that cannot be served are
// dropped and counted (Status.Dropped): ports outside 1..65535, and host
// names where EDS needs an IP (ESM external services, synced cloud load
// balancers), which are also logged once per service at info.
//
// Health aggregates the node's and the instance's checks: maintenance
// (_node_maintenance, _service_maintenance:<id>) gives DRAINING, else the
// worst status: passing HEALTHY, warning HEALTHY at Weights.Warning (or
// DEGRADED with warning: degraded), critical UNHEALTHY (or left out with
// critical: drop). Weights are clamped to 1..128; a weight of 0 (usually
// Weights.Warning 0: "no traffic while warning") serves the instance
// UNHEALTHY. An instance registered without weights counts as weight 1.
//
// Metadata (filter_metadata["envoy.lb"], for Envoy's subset load
// balancer): the service meta as is; "tags", the sorted tags
// comma-joined; "tag:<tag>" = "true" for each tag, so that a subset
// selector can use one tag as a key; "node:<key>" for each node meta
// entry; "datacenter". These keys win over service meta of the same name.
// The locality's region is the node meta value of locality.region_key or
// else the datacenter; its zone and sub-zone come from locality.zone_key
// and locality.subzone_key.
//
// Datacenters are the failover order: the i-th listed is served at
// priority i, unless datacenter_priority names its priority (two
// datacenters at the same priority form one tier). Services whose
// cluster_name renders the same name are merged into one cluster.
//
// Connect sidecar proxies and mesh, terminating, ingress and API gateways
// (instances whose Kind is set) and the consul service itself are not
// served (a service of only such instances gets no cluster); keep_mesh:
// true serves them like any other.
//
// Answers are checked for what they say about themselves. A stale answer
// (stale: true) whose server last heard from the leader more than
// max_stale ago (X-Consul-LastContact) is read again from the leader. An
// answer with X-Consul-KnownLeader: false is applied but makes the source
// stale until an answer knows a leader again. An answer with
// X-Consul-Results-Filtered-By-ACLs (a token that lost rights sees
// services vanish with a 200) is logged once per read, listed in the
// status notes ("acl_filtered" in /sources), and removes nothing while it
// says so.
//
// Where this differs from Consul's own xDS (agent/xds): Consul serves a
// mesh through proxies and decides failover with service-resolver config
// entries and prepared queries; this source serves plain names to
// proxyless clients and ordinary Envoys, so failover follows the order of
// datacenters and priorities are contiguous from 0. Consul leaves
// endpoint metadata empty and builds subsets from service-resolver
// filters; here tags and meta are exported for the subset load balancer
// instead. Consul serves warning instances HEALTHY too and clamps weights
// to 1..128 with 0 as UNHEALTHY, as here; Consul serves critical
// instances not at all, here they are UNHEALTHY by default (critical:
// drop matches Consul) so that Envoy's panic threshold still has them.
//
// A service with no instances left (deregistered, or all filtered out) is
// kept as a cluster without endpoints (on_empty: empty, the default, so
// that routes to it answer "no healthy upstream" rather than "no cluster")
// or removed (on_empty: remove). With on_empty: empty, the cluster of a
// service that vanished stays until the bridge restarts.
package consul
