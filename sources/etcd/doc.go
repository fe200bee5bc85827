// Package etcd is the `type: etcd` source: the instances that registrars
// keep in etcd under key prefixes, watched. Three formats are read, each
// what a real registrar writes:
//
//   - grpc-naming: gRPC-Go's etcd naming (the endpoints manager of
//     go.etcd.io/etcd/client/v3/naming/endpoints, which gRPC clients
//     resolve with `etcd:///<target>`): one key <target>/<anything> per
//     instance, valued {"Op":0,"Addr":"10.0.0.1:8080","Metadata":...}.
//     Read as gRPC's resolver reads it: every value is an instance, Op
//     aside; Metadata becomes endpoint metadata (an object's members by
//     name, any other value under "metadata").
//   - skydns: the records of CoreDNS's etcd plugin (and SkyDNS):
//     {"host":"10.0.0.1","port":8080,"priority":10,"weight":5} under the
//     reversed domain name, /skydns/local/example/web/x1 for
//     x1.web.example.local. Priority is the endpoint's failover priority,
//     weight its weight (0 is unset, served as 1). Mail records and
//     records without a host are no instances and are skipped.
//   - json: one instance per key in the file source's endpoint schema
//     (address, port, weight, priority, health, locality, metadata), read
//     by the file source's own parser.
//
// A key's service is its path below the prefix, one level up from the
// key: prefix/web/i-1 is an instance of "web" (prefix/eu/web/i-1 of
// "eu/web", a key right under the prefix of the prefix's last element);
// for skydns, the domain one level up, web.example.local. An entry's
// `cluster` instead names the one service of every key under its prefix
// (as an SRV query for the prefix's domain returns them all); that service
// is served even with no instance, whereas a service named by its keys
// is removed with its last key.
//
// Its keys and defaults are in docs/configuration.md; docs/etcd.md is its
// guide.
//
// The source reads every prefix once, at one revision (the first request
// linearizable, the others at its revision, 1,000 keys a request), sends
// the whole state, then watches every prefix from the next revision on one
// gRPC stream, each event being applied as it comes: a put adds or
// changes an instance, a delete (a key deleted, or expired with its
// lease) removes it. A key whose value does not parse, or whose address
// cannot be served (a host name, port 0), is dropped and counted in
// dropped_endpoints once per revision of the key, and named in the
// source's notes; the rest is served. Each endpoint's provenance
// (/debug/why, `bridge dump`) is its key and mod revision.
//
// A lost connection (every endpoint gone, a keepalive unanswered, a member
// without a leader) keeps the last good state served, marks the source
// stale and is logged once, then at most once a minute with a count, and
// once on recovery. Connection attempts are spaced by retry_min doubling
// to retry_max with jitter, whatever the error; each attempt dials each
// endpoint once at most (the etcd client's own retries are bounded, see
// newClient). A new connection resumes the watches from the last revision
// seen, without reading again. When that revision was compacted meanwhile
// the prefixes are read once more at the current revision (and watched
// from there); when etcd's revision is behind it (a watch's answer
// behind, confirmed by one linearizable request, since a member catching
// up also answers behind), or the cluster is another (a cluster rebuilt,
// or restored from a backup without a bumped revision), they are read
// once more and the update says that the registry lost its state, so that
// the removal guard holds what the refill has not brought back yet. A restore made as etcd recommends for
// watchers (etcdutl snapshot restore --bump-revision --mark-compacted)
// shows as a compaction.
package etcd
