// Package manager runs the configured sources and turns what they report
// into one merged, paced stream of changes (Changes) for the bridge to
// translate and serve. It imports the adapter contract (package sources)
// and package settings; no adapter imports it, and the bridge wires the
// two together.
//
// Each update a source sends passes these steps, all on the goroutine of
// Manager.Run, in this order (the file of each step is named after it):
//
//   - sanitize: endpoints that cannot be served are dropped and counted,
//     and a service is capped at MaxEndpointsPerService;
//   - guard: the source's removal guard holds the removals of an update
//     that looks like a broken or restarting registry (the source emptied,
//     most of its services gone dark at once, or sources.Update.Reset) and
//     lets every other update through at once. Guard states the rules and
//     why they measure services with endpoints, with a floor for small
//     sources, rather than endpoints or per-service shares;
//   - startup: the readiness gate holds the first publish until every
//     source is accounted for (synced, or optional and warm or timed out;
//     see Startup), and persisted state stands in for a source that has
//     not synced yet (warm start, see Store);
//   - merge: the merger combines the versions of a service that several
//     sources report by the service's merge mode (MergeConfig: first,
//     union or weighted) and records which sources' endpoints it shadows;
//   - cadence: Cadence paces publishes, at most one per holdoff.
//
// The contract to the bridge: the first publish carries the complete merged
// state and happens once the gate opens; later publishes carry only what
// changed. A source that fails keeps its last good state served (its Run is
// restarted with backoff); the manager's state is bounded by what the
// sources report. Statuses reports each source's status for /sources and
// the metrics; Reconfigure, SetMerge and ConfirmRemovals change a running
// manager.
package manager
