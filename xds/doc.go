// Package xds serves Envoy resources over the xDS protocol: ADS and the
// per-type services, State-of-the-World and delta, to Envoys and to
// proxyless gRPC clients. REST polling (xds/rest) and watched files
// (xds/files) are further views of the same store.
//
// The engine keeps one store per type: per name the current entry (proto
// marshalled once, content-hash version, shared by every client) and the
// watches subscribed to it, plus the wildcard watches of the type. Apply
// compares hashes, and for each changed name marks it pending on just the
// watches subscribed to it; each stream's writer then builds and sends
// what that client is owed. Per client the pending state is a map of names
// coalescing to the newest version, so a client that does not read costs
// O(its resources) and delays nobody.
//
// The two walks below follow the code file by file, in the order it runs;
// the sections after them give the protocol rules the engine relies on and
// the decisions behind it.
//
// # Follow a request
//
// One delta request, an Envoy's first EDS request on a delta ADS stream:
//
//  1. stream.go: gRPC calls adsService.DeltaAggregatedResources, which runs
//     serveDelta and serveStream. Server.connect makes the stream's client,
//     with the Rewrite of its xDS variant (streamRewrites.forStream,
//     rewrite.go), and admits it within Limits.Streams and
//     Limits.StreamsPerConnection (registry.admit, registry.go);
//     client.startWriter gives it a writer (writer.go). The stream's reader,
//     readStream, receives each request into a wire.Inbound the server's
//     admission gives it (admission.inbound, admission.go; steps 2 and 3),
//     parks it until the first Apply (readiness.wait, readiness.go) and
//     then runs the stream's handler (step 4).
//  2. wire/admit.go: a stream reads its first request only while it holds
//     a first-read lease (FirstReads.Lease), so that a storm of new streams
//     takes turns. gRPC then reads the request's bytes and hands them to the
//     codec, which first admits the request (Inbound.wait): a small one at
//     once, a large one once the request budget has room (Budget.Acquire,
//     wire/budget.go).
//  3. wire/codec.go: codec.Unmarshal decodes the request. It takes the
//     subscribed names from a cache shared by identical lists
//     (namesCache.names) and keeps the initial versions as their wire
//     records (unmarshalCompact).
//  4. delta.go: client.onDelta wraps the initial versions (wire.InitialOf)
//     and calls client.deltaRequest, which finds the request's type (typeOf,
//     request.go), checks its name lists against Limits.NamesPerRequest
//     (Limits.checkNames), and takes the locks: client.lock (request.go)
//     finds the type's store (client.storeFor), records the client's node
//     and its scope (client.identify; scoping.of, scope.go), puts a per-type
//     stream in its Envoy's group (registry.join, gate.go) and finds or
//     makes its watch of the type (client.watchFor, watch.go).
//  5. initial.go: the watch's first request goes to client.firstDelta. The
//     claimed initial versions that match count as sent, the rest as stale
//     (sentSet.put, sent.go; watch.pin, watch.go), and the subscription is
//     made (step 6).
//  6. watch.go: a wildcard by watch.wildcardOn, other names one by one
//     (watch.subscribeChecked, watch.subscribe and watch.reconcile), whose
//     differences watch.mark queues in the watch's dirty map (what the
//     client asked for is the watch's subscription, subscription.go). A list
//     covering much of the type is subscribed a chunk at a time where it can
//     (watch.claimChunks, scan.go) and queues a scan of the type's frame, as
//     the client's scope sees it, instead of an entry per name (watch.bulk,
//     scan.go; watch.rescan; typeState.frame, tables.go).
//  7. writer.go: client.poke wakes the client's writer, and the response
//     leaves as in "Follow a push" from its writer.go step.
//
// Later requests of the type take the rest of client.deltaRequest:
// subscriptions, unsubscriptions (watch.unsubscribeDelta) and ACK/NACK
// (ackState.answerDelta, acks.go; watch.answered, request.go). A SotW
// request takes the same path through client.onSotW (sotw.go) instead of
// delta.go and initial.go. A request that breaches a limit is refused
// (newRefusal) and ends its stream (client.refuse, request.go). When the
// stream ends, Server.disconnect (stream.go) drops its watches from every
// index (watch.drop, watch.go) and the client from the registry
// (registry.remove).
//
// # Follow a push
//
// One Apply, to the bytes on the wire:
//
//  1. apply.go: Server.Apply (or a Batch, a resource at a time) turns each
//     resource into an entry (step 2) and refuses an entry too large for any
//     response (step 3). Under Server.mu it finds each entry's slot
//     (slotStore.get, store.go), keeps the entries whose version changed,
//     orders them make-before-break (rank, breakRank, types.go), installs
//     them, publishes the type's chunk table and those of the scopes
//     (typeState.publishChunks, tables.go) and marks each change on the
//     watches of its name (fanout.change and fanout.subscribers, fanout.go;
//     steps 4 and 5). Then it tells the views (step 6) and pokes every
//     client it touched (client.poke, writer.go). It never sends, and never
//     waits for a client.
//  2. entry.go: newEntry makes the entry: the deterministic marshal, its
//     content-hash version and the records every response is assembled
//     from (wire.EncodeRecord), all shared by every client.
//  3. responsesize.go: responseSize.check finds an entry whose record alone
//     exceeds Options.MaxResponseBytes, and Batch.refuse (apply.go)
//     counts and logs it; the name keeps its last good version.
//  4. subscribers.go: the name's slot keeps the watches subscribed to it by
//     name in a bitmap (subscribers.each); the type's wildcard watches of
//     the unscoped clients and of the scopes the resource is or was in
//     (watchIndex.wild, subscribers.go) are marked too.
//  5. watch.go: watch.mark coalesces the change into the watch's dirty map
//     (pending, pending.go), as the client sees it (watch.visible;
//     client.visible, client.go; shape, shape.go: its scope, then its class;
//     a client not on ADS gets it rewritten, Rewrite.of in shape.go).
//  6. changes.go: viewSet.changed wakes the REST and files views.
//  7. writer.go: client.poke calls writer.poke, which starts the client's
//     writer goroutine unless it runs; writer.run calls writer.drain, which
//     asks client.next for the next response under client.mu.
//  8. owed.go: client.next takes the watches in make-before-break order:
//     watch.upserts first sends what a pending scan finds the client lacks
//     (watch.scanned and watch.owes, scan.go), then the dirty map, then the
//     unknown names whose wait is over (deadline, pending.go); then
//     watch.removals, in the order of removal. Where the protocol allows, a
//     response takes only what fits under Options.MaxResponseBytes
//     (responseSize.room). watch.respond records the response as sent (its
//     nonce and version, ackState.record in acks.go; what the client now
//     holds, and on per-type streams what it is yet to acknowledge,
//     gateNotes.noteSent in gate.go) and wraps it in a sotwMsg or deltaMsg
//     (response.go).
//  9. wire/budget.go: writer.drain makes a large response wait for its
//     share of the send budget (Budget.Reserve, charged Msg.Charge), then
//     sends it with the stream's SendMsg.
//  10. wire/codec.go: gRPC asks codec.Marshal for the response's bytes
//     (step 11).
//  11. response.go: they are the response's buffers (sotwMsg.Buffers,
//     deltaMsg.Buffers): a few envelope bytes around the entries' shared
//     records, a run of a scan's frame as one buffer (appendRecords;
//     frame.records, frame.go). The last buffer gives the budget back once
//     gRPC has written it (assemble; wire.TrackedTail and releaser,
//     wire/budget.go).
//     The writer counts the push (typeMetrics.sent, owed.go) and looks
//     again; when nothing is owed it arms the next unknown-name deadline
//     and exits.
//
// # Layout
//
// The engine is built in layers, each using only the layers below it;
// within the clients' layer, a client, its watches and the server know one
// another, and a type's store indexes the watches subscribed to it.
//
//   - Wire: package xds/wire, below everything here: the records every
//     response is assembled from, the send and request budgets, admitting
//     requests and first reads, and the gRPC codec (Codec here forwards to
//     it).
//   - Resources: types.go (the type URLs and their make-before-break
//     ranks), scope.go, resource.go (Resource, Key and the rules by which a
//     client sees one), refs.go (the clusters a route or listener names),
//     rewrite.go (Rewrite), entry.go (one version of a resource), shape.go
//     (an entry as one client sees it), limits.go (Limits, refusals),
//     metrics.go (the engine's Prometheus collectors).
//   - Store: slot.go, slottable.go (slots by index, in pages),
//     subscribers.go (a slot's subscribers, a type's watches), chunks.go and
//     frame.go (the shared forms of a type's current entries), store.go (a
//     type's store and its slots), tables.go (its published chunk tables and
//     frames), changes.go (what an Apply changed, for the views), sent.go
//     (what a watch holds: what its client was sent), responsesize.go,
//     response.go (the responses, from shared records).
//   - Clients: server.go (Options, Server and NewServer), admission.go (the
//     budgets and leases that admit streams' traffic), readiness.go (whether
//     the first Apply happened), registry.go (the streams served), client.go
//     (a stream and what it owns: its watches, its writer, its place in a
//     group), watch.go (a subscription and what ties its parts),
//     subscription.go (what a watch's client asked for), pending.go (what it
//     is owed), acks.go (what it was sent and answered), scan.go (an initial
//     state in bulk), gate.go (make-before-break across pushes and per-type
//     streams), owed.go (what a client is owed next), writer.go, fanout.go
//     (an Apply's changes marked on their watches), orphans.go (slots
//     released after their last removal was sent).
//   - Protocol: request.go, initial.go, sotw.go, delta.go, stream.go (the
//     gRPC services), visibility.go (scopes), apply.go, view.go (the API of
//     the views: Select, Snapshot, Changes), status.go and dump.go (what
//     the admin API shows of clients and resources).
//
// # The protocol, as the engine relies on it
//
// The xDS transport protocol is specified at
// https://www.envoyproxy.io/docs/envoy/latest/api-docs/xds_protocol. It has
// four variants: State of the World (SotW) or incremental (delta), each on
// one stream per type or on one aggregated stream for every type (ADS).
// Envoy speaks all four; gRPC's proxyless clients speak SotW ADS only. The
// engine serves all four and relies on these rules:
//
//   - SotW: a request names the resources it wants (resource_names). A
//     response carries a version_info and a nonce; for CDS and LDS it lists
//     every subscribed resource, because an absent cluster or listener is
//     read as deleted, while EDS and RDS responses may list just some. The
//     client answers each response: an ACK is a request with the response's
//     nonce, a NACK the same with error_detail. A request whose nonce is not
//     the latest of its type on the stream is stale.
//   - Delta: a request subscribes and unsubscribes names; a response carries
//     only changed resources, each with its own version, and the names
//     removed. A new stream lists what the client already holds in
//     initial_resource_versions, and the server sends only what differs.
//     ACK and NACK are per response (response_nonce, error_detail). "*" is
//     the wildcard, and explicit names can coexist with it.
//   - xDS is eventually consistent: a route can name a cluster the client
//     does not have yet, or a cluster can arrive before its endpoints. On
//     ADS the server chooses the order, and make-before-break avoids both:
//     clusters, then their endpoints, then listeners, then routes, and only
//     then removals (see "Make-before-break").
//   - Envoy warms a new or changed cluster: it waits for the cluster's
//     endpoints (up to initial_fetch_timeout, 15 s by default) before using
//     it. So a changed cluster's assignment is sent again even when it did
//     not change, and an EDS request is always answered, also for a cluster
//     without endpoints.
//   - Everything in a request (names, type URLs, initial versions) is
//     client input (see "Client input makes no lasting state").
//
// Other control planes fell into traps the engine is built to avoid: a
// NACKed version re-sent to the client in a tight loop, as in
// go-control-plane's server (see "NACK"); endpoints served empty after a
// restart before the sources synced (see "Readiness"); EDS sent before
// CDS, or not sent again after a cluster changed; delta reconnects that
// ignore initial_resource_versions; every response marshalled per client;
// and named CDS/LDS requests, which gRPC clients send, parked until they name
// every resource (see below).
//
// # Why not go-control-plane's server and SnapshotCache
//
// Its server answers a watch with a whole snapshot slice: each change costs
// O(clients × subscribed resources), SotW EDS re-sends every assignment, a
// NACK is answered with the same version again, and
// in ADS mode a named CDS/LDS request is parked until the names cover the
// snapshot, which grpc-go's proxyless client never does. The engine keeps
// go-control-plane's generated service interfaces and writes the stream
// handling itself.
//
// # Store and versions
//
// Per type and name: the current entry, whose version is the hex xxhash64 of
// the deterministic marshal. Identical input gives identical versions on
// every replica and after restarts, which is what makes delta reconnects
// with initial_resource_versions free, also against another replica. The
// Any (and the delta Resource wrapper) is built once per version and shared
// by every client. An Apply whose content hashes are unchanged is a no-op.
//
// # Fan-out
//
// Each name keeps the set of watches subscribed to it by name; each type
// keeps its wildcard watches. Apply marks a change on exactly those watches
// (a map write under the client's lock) and pokes their writers; it never
// sends and never waits for a client. Each stream has one writer (a
// goroutine started when the client is owed something, gone when it is
// not: writer.go) that drains its client's pending map; the pending map
// coalesces to the newest entry per name, so a client that stops reading
// holds at most one pending entry per subscribed name, and only its own
// writer is blocked by gRPC flow control. A subscription to much of a type
// at once (a wildcard, an Envoy's first EDS request) queues no entry per
// name: the writer scans a shared frame of the type instead (scan.go), so
// a client's initial state costs a few loads per resource.
//
// # Scopes
//
// A large fleet need not send every cluster to every client. The caller
// gives each resource the scopes whose clients a wildcard subscription
// delivers it to and those it is denied to (Resource.Scopes and .Denied,
// at most MaxScopes), and the engine a Scoper, which maps a node to a
// scope ID once, when its stream's first request names the node (0 is
// unscoped: every resource, as without scopes). A client's wildcard
// delivers what its scope holds; a name it asks for (a delta or SotW
// subscription by name, on-demand CDS, a gRPC target) is served whatever
// its scope, unless denied to it, when it is answered as absent. The
// engine knows IDs and bitsets only: which services go to which scope is
// the caller's rule.
//
// A scope costs nothing per client. Each type keeps a chunk table and
// frame per scope (tables.go), of the entries that scope's
// wildcard delivers, and a client of a scope shares them exactly as an
// unscoped client shares the type's, so its sent set is a pointer per 64
// resources while it is up to date. A change is marked on the wildcards of
// the unscoped clients and of the scopes the resource is or was in, never
// on the other scopes' clients. A change of a resource's scopes alone is
// an Apply like any other: clients the resource enters a scope of are
// sent it, those it leaves are sent its removal, the rest nothing. A
// change of a node's scope (SetScopes) sends the client the difference
// between its old and its new scope.
//
// # Memory per client
//
// Per client and type the engine keeps what the client holds (sentSet: a
// map for sparse subscriptions, a slice indexed by the slot's dense index
// once the watch covers a quarter of its type) and one bit per subscribed
// name in the name's subscriber bitmap (indexed by the watch's dense index
// in its type): at most a pointer per resource of the type, and a pointer
// per 64 resources while it holds what the type holds (shared chunks,
// chunks.go). An idle stream holds one goroutine of its own, its reader (the
// writer runs only while the client is owed something), beside gRPC's three
// per connection.
//
// # SotW ACK decoding
//
// Every SotW EDS ACK repeats all subscribed names. Decoding them with the
// standard codec would be most of the server CPU per change; Codec decodes
// each distinct list once and shares it, and a watch that receives the very
// same shared list skips even the hashing of its names. Delta ACKs carry no
// names, so delta does not need it.
//
// # What a response carries
//
// SotW CDS/LDS: everything the client subscribes to (wildcard = all visible
// resources; named = just those names). SotW EDS/RDS and other types: only
// the entries that changed since they were last sent to that client. Delta:
// only changed entries and removed_resources. version_info/system_version
// are a per-stream per-type counter and nonces a per-stream counter: unique
// per stream, which is all ACK/NACK matching needs. Per-resource delta
// versions are the content hashes.
//
// Responses are assembled from each resource's records, encoded once per
// version and shared by every client (wire/encode.go), and stay under
// Options.MaxResponseBytes: a set that does not fit goes out as several
// responses where the protocol allows it, and a resource that alone does
// not fit is refused by Apply (responsesize.go).
//
// Large responses (initial states) wait for a share of a global send
// budget, returned when gRPC has written them (wire/budget.go); small pushes
// never wait. A response is charged what it keeps alive, not its wire
// size: records sliced from a shared frame count once for every response
// in flight that slices them. Large requests (a reconnect's initial
// versions) likewise wait for a request budget before they are decoded,
// new streams take turns to read their first request, and a delta
// request's initial versions are walked as the records they came in rather
// than decoded into a map (wire/admit.go, wire/codec.go): a reconnect
// storm holds a bounded amount of requests, the rest stays in the clients.
//
// # Make-before-break
//
// A writer always sends, in type order CDS, EDS, SDS, LDS, RDS, others,
// every pending upsert first and only then any pending removal, removals
// in the opposite order of reference: LDS, RDS, CDS, EDS, SDS, others. A
// secret goes before the listener that names it; a listener goes before
// the route it names, the route before its clusters, a cluster before its
// assignment, so no remaining resource points at a removed one. In SotW the first CDS response of a change therefore still lists a
// cluster that is being removed, and a second one drops it after the
// EDS/LDS/RDS upserts.
// A cluster upsert re-marks its assignment (forced, even if unchanged), so
// Envoy can finish warming the new cluster. Endpoint-only changes need no
// ordering and go out at once. Apply marks upserts before removals in the
// same order, so even a writer that looks in the middle of an Apply sees
// them make-before-break. Secrets rank between the assignments and the
// listeners that name them, and are removed last.
//
// Type order covers one push; the gate (gate.go) covers the rest, per
// client. A route configuration or listener that sends traffic to a
// cluster waits until the client has that cluster ready: sent with its
// assignment on ADS, acknowledged on the CDS and EDS streams of the same
// Envoy (its group: node and connection) on per-type streams, which have
// no order between them. A cluster's removal, and its assignment's, waits
// while a route configuration or listener the client holds (on per-type
// streams: has not acknowledged replacing) still names it. Only clusters
// the client is getting are waited for; nothing waits on a timer.
//
// The engine does not hold EDS back until the CDS response is ACKed (as
// Consul does for delta). On one ADS stream Envoy processes responses in
// order, so sending CDS before EDS already guarantees the cluster exists
// when its assignment arrives; gating would add a round trip to every new
// service and would stall endpoint updates behind a NACKed cluster.
//
// # Secrets
//
// Resources marked Private (SDS secrets) are the one kind that must never
// reach every client: they go only to the clients of the scopes in their
// Scopes, by name or by wildcard, never to an unscoped client, never
// through a view (REST, files); a client that asks for one it is not
// granted is answered as if it did not exist (Options.OnDenied is told).
// Dumps redact every sensitive field (private keys), as Envoy's own
// config dump does.
//
// # Readiness
//
// Nothing is sent before the first Apply (the caller applies only once all
// sources have synced), and no request is even read before it: a request
// handled against the still-empty store would compare a delta reconnect's
// initial_resource_versions with nothing and re-send everything after a
// bridge restart, the very case free reconnects exist for. Requests that
// arrive early wait (gRPC flow control bounds them) and are handled in
// order against the first state.
//
// # Always answer
//
// A wildcard SotW or fresh delta wildcard watch gets a first response even
// when there is nothing to send, so Envoy finishes initialising. A name
// without a resource is answered as absent: SotW CDS/LDS without it, SotW
// EDS with an empty ClusterLoadAssignment of that name, SotW RDS with an
// empty response, delta with the name in removed_resources. Once readiness
// is Options.UnknownNameWait old this happens at once: the store then holds
// every source's state, and Envoy's on-demand CDS gives up after about 5 s.
// Within that window a request waits until its end: the first state may be
// a warm start from saved state or leave sources still starting, and names
// they are about to add arrive in the next publish; answering "absent"
// first would make Envoy drop and re-add them. A SotW CDS/LDS response sent
// after the request already tells the client the name is absent (it lists
// the full set), so the end of the wait sends nothing more. A gRPC-only
// resource asked for by a non-gRPC client is answered at once as absent: it
// exists, just not for that client.
//
// Delta follows the spec's subscription rules: every subscription is
// answered, also of a name the client already holds or was told was
// removed (the resource again, or its removal again); unsubscribing a name
// while subscribed to "*" is answered with what the wildcard alone gives
// (the resource, or its removal). SotW: an empty resource_names is the
// legacy wildcard for CDS/LDS only while the stream never named anything
// (not even "*"); after that it unsubscribes from everything.
//
// # Client input makes no lasting state
//
// Names, initial versions and type URLs are client input. A claimed or
// subscribed name the server does not have gets a slot pinned by the
// watches that reference it, freed once none does (at the latest when the
// stream ends); the slot table keeps pages only where slots are in use,
// and the name map shrinks when mostly empty. A type URL other than the
// four standard types,
// Options.Collections and those Apply was given gets a private empty store
// of that stream, gone with it, and one shared metric label ("unknown").
// Limits (see Limits) bound the rest; a breach ends the stream with a
// status and is counted in xdsbridge_xds_refused_total{reason}, whose
// label values are fixed.
//
// # History makes no lasting state either
//
// A removed resource's slot stays only while a client may still hold what
// it had: while some watch is owed its removal (slot.owed), a count kept
// where the removal is marked and sent, so a push costs no pass over the
// clients. Once the last removal is sent, by a writer holding only its
// client's lock, the slot is queued and released under Server.mu when that
// writer runs out of work (or at the next Apply). A removal is marked only
// on watches whose clients hold the name, so a client that stops reading
// keeps the slots of what it held, not of every name that came and went
// meanwhile. The store's size is thus what it serves plus what its clients
// are still owed, never the names it ever served.
//
// The cost of forgetting is nothing a client can see. A client that comes
// back claiming a forgotten name (delta initial_resource_versions after a
// reconnect, perhaps to another replica or after a restart, which never
// knew it) gets the removal any name the store lacks gets; under a
// wildcard such claims are owed removals, not subscriptions, and do not
// count against Limits.UnknownNames. A SotW client holds nothing the
// server must remember: each response carries what it answers.
//
// A delta reconnect costs O(names) under Server.mu, never a scan of the
// type per claimed name: a reconnect listing every name of a large type
// must not stall every other client's pushes.
//
// # Deliberate deviations from the spec
//
//   - A type the server does not serve is answered like a type without
//     resources (SotW: an empty response, at once for a wildcard or as
//     unknown names otherwise; delta: the names in removed_resources) rather
//     than left unanswered; more than 16 such types on one stream end it
//     with InvalidArgument.
//   - A request breaching a limit ends the whole stream (xDS has no error
//     answer to one request); so does an ADS request without type_url
//     (InvalidArgument, as go-control-plane does).
//   - SotW EDS/RDS removals are not sent: the spec lets the server omit
//     them, and Envoy drops an assignment or route with its cluster or
//     listener.
//   - version_info/system_version_info and nonces are per-stream counters,
//     not the content of the state (per-resource delta versions are content
//     hashes).
//   - The unary Fetch* (REST over gRPC) methods answer Unimplemented.
//   - Unknown names wait up to Options.UnknownNameWait right after
//     readiness (above); the spec does not ask for a delay.
//
// # NACK
//
// A NACK (error_detail with the latest nonce of the type) is recorded on
// the watch (version, nonce, error, count; see Clients), logged once and
// counted in xdsbridge_xds_nacks_total{type}. What was sent stays recorded
// as sent, so the rejected content is not sent to that client again; the
// next different version is. Stale nonces change nothing, but a changed
// resource_names list on any SotW request still updates the subscription.
//
// # Clients without ADS, and views
//
// Resources are published with ADS config sources; a client whose
// bootstrap has no ads_config rejects them. A client on per-type streams
// is served its Rewrite (rewrite.go): the cluster's eds_config (and a gRPC
// listener's RDS source) becomes an api_config_source naming
// Options.ConfigCluster, GRPC for SotW and DELTA_GRPC for delta streams.
// We assume such a client takes EDS the way it takes CDS (per-type, same
// protocol); a fleet mixing ADS and per-type streams per type is not
// served a tailored rewrite. A resource is rewritten lazily, once per
// resource version, under the entry's own lock, and shared like the entry;
// its delta version is its own content hash, so a per-type delta reconnect
// is free too.
//
// REST polling (xds/rest) and watched files (xds/files) are views of the
// same store (view.go): they read entries with Select/Snapshot, learn of
// changes through Changes, and serve the very bytes the streams send.
// Deliberate deviation in the files view: a new cluster's EDS file is
// written before cds.json names it (the reverse of the ADS order), because
// Envoy reads the file as soon as it creates the cluster, and a missing
// file ends the cluster's warming with no endpoints. Removals still come
// last.
package xds
