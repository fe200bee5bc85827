// Package replicas is the benchmark of bridge replicas sharing one fleet:
// delta clients behind a TCP balancer (Balancer, run as `xdsload
// balance`), each replica on a Consul client agent of its own, churn, and
// one replica killed and restarted (Run). What the clients received is
// kept in a ledger, so that every change's latency and every resend is
// accounted for.
package replicas
