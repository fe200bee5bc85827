// Package proc is how the benchmarks run and sample the processes they
// start (the bridge binary, Consul agents, the balancer): starting them in
// their own process group with their output in a log, stopping them,
// polling for a condition, their CPU time and memory from /proc, the
// machine's load average, and the probes of the bridge's admin API
// (ready, synced, a metric's sample).
package proc
