// Package zookeeper is the `type: zookeeper` source: services that
// registrars keep in ZooKeeper, in the layouts of the discovery systems
// that put them there. It watches; it never polls.
//
// Its keys and defaults are in docs/configuration.md; docs/zookeeper.md is
// its guide.
//
// The formats, what each reads, and the cluster each instance feeds:
//
//   - curator: Apache Curator's service discovery. path is the base path;
//     each child is a service (a cluster of its name), each of its
//     children one ServiceInstance in Curator's JSON: address, port (or
//     sslPort when port is null), payload (its scalar fields become
//     metadata payload.<field>), enabled (false: served draining). The id
//     and the other port become metadata too.
//   - serverset: a Finagle or Aurora serverset. path is one service
//     (cluster: default the path's last element); its `member_` children
//     are the instances: serviceEndpoint, or the additional endpoint that
//     endpoint names; status (ALIVE healthy, WARNING degraded, STOPPING
//     draining, others unhealthy) and shard become metadata.
//   - nerve: Airbnb Nerve's registrations, as Synapse reads them. path is
//     one service's zk_path; each child holds host, port, name, weight
//     and labels (metadata label.<key>).
//   - dubbo: Apache Dubbo's ZooKeeper registry. path is the root (/dubbo);
//     each child is an interface (a cluster of its name), whose
//     providers/ children are URL-encoded provider URLs
//     (dubbo://ip:port/interface?...): weight (100 when absent) is the
//     endpoint's weight; group, version, side, application and the
//     protocol become metadata; enabled=false is served draining.
//
// Watching. Every directory read arms a child watch, every instance read
// (but Dubbo's, whose instance is its name) a data watch, every missing
// path a watch for its creation; a watch that fires is read again, which
// arms it again. The client library does not implement ZooKeeper 3.6's
// persistent recursive watches (AddWatch), so the source uses these
// one-shot watches on every server version. A directory absent is a
// service gone (removed); present and empty, a service with no
// instances.
//
// Failures. The client keeps one session; a connection lost is retried
// with backoff (retry_min..retry_max, jittered, whatever the error) while
// the last good state stays served and the source shows stale in
// /sources and the metrics; the session resumed, its watches fire for
// what changed meanwhile. A failure is logged when it starts, at most once
// a minute while it lasts (with the count), and when it ends. When the
// source's own session expired, every path is read again and the update
// that follows says the registry may be refilling (the removal guard then
// holds the removals it implies until the refill settles). A registrar's
// session expiring removes all its instances at once: the source reports
// them in one update, which the removal guard judges like any other. An
// instance that does not parse, or names no IP address, is dropped,
// counted in dropped_endpoints and named in the status note
// dropped_znodes; its service is served without it. Two instances of one
// service at one address and port are served once.
//
// Provenance: each endpoint's origin names its znode and the version of
// its data (`znode /services/web/1f0c... version 2`), as /debug/why shows.
package zookeeper
