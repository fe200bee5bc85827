// Package consul holds the benchmarks of the bridge on a real Consul
// agent, each a Config and a Run: the end-to-end fan-out (Run, reported
// like the fan-out scenarios), every kind of registry change timed to the
// clients at scale (RunEvents), and an agent restarted empty and refilled
// (RunRefill). It also starts the Consul the other families run against
// (Topology: a dev agent, or a server and a client agent, with TLS or not)
// and registers their services (RegisterAll, Instance).
package consul
