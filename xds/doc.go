// Design notes for the serving engine (issue 3). The package comment is in
// server.go; this file holds the decisions and their reasons.
//
// # Why not go-control-plane's server and SnapshotCache
//
// Its server answers a watch with a whole snapshot slice: each change costs
// O(clients × subscribed resources), SotW EDS re-sends every assignment, a
// NACK is answered with the same version again (#962), and in ADS mode a
// named CDS/LDS request is held until the names cover the snapshot, which
// grpc-go's proxyless client never does. The engine keeps go-control-plane's
// generated service interfaces and writes the stream handling itself.
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
// sends and never waits for a client. Each stream has one writer (the
// handler goroutine) that drains its client's pending map; the pending map
// coalesces to the newest entry per name, so a client that stops reading
// holds at most one pending entry per subscribed name, and only its own
// writer is blocked by gRPC flow control.
//
// # Memory per client
//
// Per client and type the engine keeps what the client holds (heldSet: a
// map for sparse subscriptions, a slice indexed by the slot's dense index
// once the watch covers a quarter of its type) and one bit per subscribed
// name in the name's subscriber bitmap (indexed by the watch's dense index
// in its type). An Envoy with wildcard CDS and EDS for 1,000 clusters costs
// about 10 KB of engine heap (BenchmarkApply); with gRPC's own buffers the
// bench harness measures ~34 KB of server heap per client (issue 4, S1).
//
// # SotW ACK decoding
//
// Every SotW EDS ACK repeats all subscribed names. Decoding them with the
// standard codec was about half of the server CPU per change; Codec decodes
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
// version and shared by every client (wire.go), and stay under
// Options.MaxResponseBytes: a set that does not fit goes out as several
// responses where the protocol allows it, and a resource that alone does
// not fit is refused by Apply (limit.go).
// Large responses (initial states) wait for a share of a global send
// budget, returned when gRPC has written them (budget.go); small pushes
// never wait.
//
// # Make-before-break
//
// A writer always sends, in type order CDS, EDS, LDS, RDS, others, every
// pending upsert first and only then any pending removal. In SotW the
// first CDS response of a change therefore still lists a cluster that is
// being removed, and a second one drops it after the EDS/LDS/RDS upserts.
// A cluster upsert re-marks its assignment (forced, even if unchanged), so
// Envoy can finish warming the new cluster. Endpoint-only changes need no
// ordering and go out at once. Apply marks upserts before removals in the
// same order, so even a writer that looks in the middle of an Apply sees
// them make-before-break.
//
// The engine does not hold EDS back until the CDS response is ACKed (as
// Consul does for delta). On one ADS stream Envoy processes responses in
// order, so sending CDS before EDS already guarantees the cluster exists
// when its assignment arrives; gating would add a round trip to every new
// service and would stall endpoint updates behind a NACKed cluster.
//
// # Always answer
//
// Nothing is sent before the first Apply (the caller applies only once all
// sources have synced). A wildcard SotW or fresh delta wildcard watch gets
// a first response even when there is nothing to send, so Envoy finishes
// initialising. A name without a resource is answered after
// Options.UnknownNameWait (counted from readiness at the earliest): SotW
// CDS/LDS without it, SotW EDS with an empty ClusterLoadAssignment of that
// name, SotW RDS with an empty response, delta with the name in
// removed_resources. A gRPC-only resource asked for by a non-gRPC client is
// answered at once as absent: it exists, just not for that client.
//
// # NACK
//
// A NACK (error_detail with the latest nonce of the type) is recorded on
// the watch (version, nonce, error, count; see Clients), logged once and
// counted in xdsbridge_xds_nacks_total{type}. What was sent stays recorded
// as held, so the rejected content is not sent to that client again; the
// next different version is. Stale nonces change nothing, but a changed
// resource_names list on any SotW request still updates the subscription.

package xds
