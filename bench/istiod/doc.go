// Package istiod holds the benchmarks of serving istiod: the server CPU
// per change of each Istio shape's server in its own process (Run) and a
// real Consul agent's instance change timed to an istiod-like client
// (RunConsul).
package istiod
