// Package istio translates the normalized model into Istio configuration
// for istiod's MCP-over-xDS config sources: each service becomes a
// ServiceEntry, and in the WorkloadEntry shape each of its endpoints a
// WorkloadEntry, every one wrapped as an MCP Resource (istio.io/api
// mcp/v1alpha1) named "namespace/name" whose version is its content hash.
//
// It is a package of its own, beside the Envoy translation rather than in
// it, because its output is another consumer's API (istio.io/api, which
// only this package imports), its options are another configuration
// section, and the two share nothing but the model and the selector of
// cluster shaping rules (sources.Selector), which both reuse.
//
// Like package translate it is pure and deterministic: no I/O, clocks or
// randomness; the same service yields byte-identical resources under
// deterministic marshalling whatever the order of its endpoints; the
// resources are immutable once returned. A resource's name is stable
// across restarts and replicas, so the serving engine can key, hash and
// diff them like Envoy resources.
//
// # The mapping
//
// Host: Options.Host with {service} (and {source}) replaced by the name in
// lower case; by default <service>.service.consul, the name Consul's DNS
// interface gives it. A name that makes no valid host fails the service.
//
// Port: one service port. Istio sends a service port's traffic to every
// endpoint of the entry, on the port the endpoint maps the port's name to
// (else on the service port's own number), and a Consul instance has one
// port; so each endpoint maps the one service port to its own port, and
// the service port's number is the port most instances listen on (the
// lowest of those tied), unless a rule sets it. A port per distinct
// instance port, as the MCP servers that replaced Istio's Consul registry
// make, sends traffic to instances on ports they do not listen on.
//
// Protocol: the one most instances declare in their ProtocolKey metadata
// entry or a ProtocolKey=value tag, in any case (HTTP, HTTPS, HTTP2, GRPC,
// GRPC-Web, TCP, TLS, Mongo, MySQL, Redis), else Options.DefaultProtocol
// (TCP). The port is named after it ("http"). An instance that declares
// another or an unsupported protocol is dropped and counted.
//
// Endpoints: healthy, degraded and unknown-health endpoints are served;
// unhealthy and draining ones are left out (Istio has no endpoint health
// in a ServiceEntry: it would send them traffic). Only the most preferred
// priority that has endpoints is served, since Istio has no priorities: a
// datacenter listed for failover takes traffic once the preferred one has
// none. Each address:port is served once. Address, the port map, labels
// (see labels), locality "region/zone/subzone" and weight (0 and 1 are
// left unset, Istio's default of 1) make each workload. A service whose
// endpoints are all left out keeps its ServiceEntry without endpoints: its
// host stays known to the mesh, so calls fail at once with "no healthy
// upstream" rather than leaving the mesh for whatever address DNS gives,
// and the change stays an endpoint update in istiod rather than a removal
// that reconfigures every proxy.
//
// Namespace, exportTo and location come from Options, refined per service
// by Rules. The WorkloadEntry shape serves MESH_INTERNAL entries only
// (Istio applies a workload selector to those only): New refuses
// MESH_EXTERNAL with it.
//
// # Validation
//
// Every resource is checked against the rules istiod applies before it
// stores one (validate.go). An endpoint whose workload breaks one is
// dropped and counted in Result.Dropped; a ServiceEntry that breaks one
// fails the service with an error naming the rule.
//
// # What istiod does with them
//
// These facts, read from istio/istio (pkg/adsc, pilot/pkg/bootstrap
// configcontroller.go, pilot/pkg/config/memory), bind whoever serves the
// resources:
//
//   - istiod opens one SotW ADS stream per configSources address and asks
//     for every collection it knows (ServiceEntry, WorkloadEntry,
//     VirtualService, DestinationRule, ... under the type URLs of
//     Kind.TypeURLs) and for core/v1alpha1/MeshConfig. It counts the
//     source as synced only once every collection was answered, so the
//     collections the bridge does not serve must be answered empty.
//   - Each response replaces the whole collection: a resource missing from
//     it is deleted. Responses must therefore never be split; istiod
//     accepts messages up to 2 GiB.
//   - It ACKs every response and never NACKs: a resource that fails its
//     validation is logged in istiod and skipped (an update keeps the
//     previous version), hence the validation here.
//   - It replaces a stored resource only when metadata.version differs, so
//     the content version keeps unchanged resources free.
//   - Metadata without create_time is stored as created at the Unix epoch,
//     so istiod, which orders services of one host by creation time,
//     puts these first.
//   - On a broken stream it reconnects with backoff and asks for
//     everything again.
package istio
