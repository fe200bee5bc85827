// Package manager runs the configured sources and turns what they report
// into one merged, paced stream of changes (Changes) for the bridge to
// translate and serve. It imports the adapter contract (package sources)
// and package settings; no adapter imports it, and the bridge wires the
// two together.
//
// Each update a source sends passes these steps, all on the goroutine of
// Manager.Run (each step has its file, named after it):
//
//   - intake: the update is stamped with the source's name and taken in by
//     the intake, which records the source's startup phase, sanitizes the
//     update and passes it through the source's removal guard;
//   - sanitize: endpoints that cannot be served are dropped and counted,
//     and a service is capped at MaxEndpointsPerService;
//   - guard: the removal guard holds the removals of an update that looks
//     like a broken or restarting registry (the source emptied, most of its
//     services gone dark at once, or sources.Update.Reset) and lets every
//     other update through at once. Guard (guardrule.go) states the rules
//     and why they measure services with endpoints, with a floor for small
//     sources, rather than endpoints or per-service shares;
//   - merger: the merger keeps what every source reports and, for each
//     service that changed, resolves the version to serve by the
//     service's merge mode (resolve.go; MergeConfig in mergeconfig.go:
//     first, union or weighted), recording whose endpoints it shadows;
//   - startup: the readiness gate holds the first publish until every
//     source is accounted for (synced, or optional and warm or timed out;
//     see Startup), and persisted state stands in for a source that has
//     not synced yet (warm start; statedir.go, StateDir);
//   - cadence: Cadence paces the publishes that follow, at most one per
//     holdoff, and changelog.go logs what each source changed.
//
// Beside the steps: statusview.go keeps what the manager adds to each
// source's status (SourceStatus), reconfigure.go changes the sources and
// the merge configuration of a running manager (replace.go replaces a
// changed source make-before-break), and restart.go restarts a source
// whose Run failed.
//
// The contract to the bridge: the first publish carries the complete merged
// state and happens once the gate opens; later publishes carry only what
// changed. A source that fails keeps its last good state served (its Run is
// restarted with backoff); the manager's state is bounded by what the
// sources report. Statuses reports each source's status for /sources and
// the metrics; Reconfigure, SetMerge and ConfirmRemovals change a running
// manager.
package manager
