package translate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/sources"
)

// grpcShape is a typical rule for a gRPC service: least request, HTTP/2
// upstreams, outlier detection and no panic mode.
const grpcShape = `
lb_policy: LEAST_REQUEST
least_request_lb_config: {choice_count: 3}
typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    explicit_http_config: {http2_protocol_options: {}}
outlier_detection:
  consecutive_5xx: 5
  interval: 10s
  base_ejection_time: 30s
  max_ejection_percent: 50
common_lb_config:
  healthy_panic_threshold: {value: 0}
`

// edgeShape is a second rule with the other fields operators migrate.
const edgeShape = `
connect_timeout: 1s
per_connection_buffer_limit_bytes: 32768
circuit_breakers:
  thresholds: [{priority: DEFAULT, max_connections: 1000, max_requests: 5000}]
health_checks:
  - timeout: 1s
    interval: 5s
    unhealthy_threshold: 3
    healthy_threshold: 2
    http_health_check: {path: /healthz}
common_lb_config:
  locality_weighted_lb_config: {}
transport_socket:
  name: envoy.transport_sockets.tls
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
    sni: payments.internal.example
    common_tls_context:
      validation_context:
        trusted_ca: {filename: /etc/ssl/certs/ca.pem}
`

func fragment(t testing.TB, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustRule(t testing.TB, match sources.Selector, clients Clients, text string) Rule {
	t.Helper()
	r, err := NewRule(match, clients, fragment(t, text))
	if err != nil {
		t.Fatalf("NewRule: %v", err)
	}
	return r
}

// shapedCases are golden cases of shaped clusters, built on first use (the
// rules need a testing.TB to fail on).
func shapedCases(t testing.TB) []goldenCase {
	t.Helper()
	greeter := sources.Service{Name: "greeter", Endpoints: []sources.Endpoint{
		{Address: "127.0.0.1", Port: 50051, Health: sources.HealthHealthy, Metadata: map[string]string{"tags": "grpc,v1"}},
	}}
	payments := sources.Service{Name: "payments", Source: "consul", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 8443, Health: sources.HealthHealthy},
	}}
	grpcRule := mustRule(t, sources.Selector{Tags: []string{"grpc"}}, AllClients, grpcShape)
	envoyOnly := mustRule(t, sources.Selector{Services: []string{"greet*"}}, EnvoyClients, grpcShape)
	edge := mustRule(t, sources.Selector{Sources: []string{"consul"}}, AllClients, edgeShape)
	roundRobin := mustRule(t, sources.Selector{Services: []string{"pay*"}}, AllClients, "lb_policy: ROUND_ROBIN\noutlier_detection: {consecutive_5xx: 2}")
	return []goldenCase{
		{name: "shaped-grpc", svc: greeter, opts: Options{GRPC: true, Shaping: &Shaping{Rules: []Rule{grpcRule}}}},
		{name: "shaped-envoy-only", svc: greeter, opts: Options{GRPC: true, Shaping: &Shaping{Rules: []Rule{envoyOnly}}}},
		// The later rule replaces lb_policy and outlier_detection whole and
		// leaves the rest of the earlier ones.
		{name: "shaped-override", svc: payments, opts: Options{Shaping: &Shaping{Rules: []Rule{
			mustRule(t, sources.Selector{}, AllClients, grpcShape), edge, roundRobin}}}},
		{name: "shaped-nomatch", svc: payments, opts: Options{Shaping: &Shaping{Rules: []Rule{grpcRule}}}},
	}
}

func TestShapingClientClasses(t *testing.T) {
	svc := sources.Service{Name: "greeter"}
	envoyOnly := mustRule(t, sources.Selector{}, EnvoyClients, "lb_policy: LEAST_REQUEST")
	grpcOnly := mustRule(t, sources.Selector{}, GRPCClients, "lb_policy: RING_HASH")
	r, err := Service(svc, Options{Shaping: &Shaping{Rules: []Rule{envoyOnly, grpcOnly}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Cluster.GetLbPolicy().String(); got != "LEAST_REQUEST" {
		t.Errorf("Envoy cluster lb_policy = %s, want LEAST_REQUEST", got)
	}
	if got := r.GRPCCluster.GetLbPolicy().String(); got != "RING_HASH" {
		t.Errorf("gRPC cluster lb_policy = %s, want RING_HASH", got)
	}
	// A rule for every client leaves no separate gRPC variant.
	all := mustRule(t, sources.Selector{}, AllClients, "lb_policy: LEAST_REQUEST")
	if r, _ := Service(svc, Options{Shaping: &Shaping{Rules: []Rule{all}}}); r.GRPCCluster != nil {
		t.Error("a rule for all clients produced a gRPC variant")
	}
}

// TestNewRuleReadsConfigurationScalars checks that a fragment takes
// durations as the rest of the configuration writes them and numbers and
// booleans written as strings, which protojson alone refuses.
func TestNewRuleReadsConfigurationScalars(t *testing.T) {
	r := mustRule(t, sources.Selector{}, AllClients,
		`{connect_timeout: 1m30s, ignore_health_on_host_removal: "true", outlier_detection: {interval: 100ms, consecutive_5xx: "7"}}`)
	c := r.apply(Cluster("x", 0))
	od := c.GetOutlierDetection()
	if got := c.GetConnectTimeout().AsDuration(); got != 90*time.Second {
		t.Errorf("connect_timeout = %v, want 1m30s", got)
	}
	if got := od.GetInterval().AsDuration(); got != 100*time.Millisecond {
		t.Errorf("outlier_detection.interval = %v, want 100ms", got)
	}
	if od.GetConsecutive_5Xx().GetValue() != 7 || !c.GetIgnoreHealthOnHostRemoval() {
		t.Errorf("consecutive_5xx = %v, ignore_health_on_host_removal = %v; want 7, true", od.GetConsecutive_5Xx(), c.GetIgnoreHealthOnHostRemoval())
	}
}

func TestNewRuleErrors(t *testing.T) {
	tests := []struct {
		name     string
		match    sources.Selector
		fragment string
		want     string // the error, key first
	}{
		{"typo at top level", sources.Selector{}, "lb_polcy: LEAST_REQUEST", "cluster.lb_polcy: unknown field of envoy.config.cluster.v3.Cluster"},
		{"typo nested", sources.Selector{}, "outlier_detection: {consecutive_5xxx: 5}", "cluster.outlier_detection.consecutive_5xxx: unknown field"},
		{"typo in a list", sources.Selector{}, "health_checks: [{timeout: 1s, intervall: 5s}]", "cluster.health_checks[0].intervall: unknown field"},
		{"typo inside an Any", sources.Selector{}, `transport_socket: {name: tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, snii: x}}`, "cluster.transport_socket.typed_config.snii: unknown field"},
		{"unknown Any type", sources.Selector{}, `transport_socket: {name: tls, typed_config: {"@type": type.googleapis.com/nope.Nope}}`, `cluster.transport_socket.typed_config.@type: unknown type "type.googleapis.com/nope.Nope"`},
		{"@type outside an Any", sources.Selector{}, `"@type": x`, "cluster.@type: unknown field of envoy.config.cluster.v3.Cluster"},
		{"null map value", sources.Selector{}, `metadata: {filter_metadata: {A}}`, "cluster.metadata.filter_metadata.A: needs a value, not null"},
		{"null list element", sources.Selector{}, `circuit_breakers: {thresholds: [null]}`, "cluster.circuit_breakers.thresholds[0]: needs a value, not null"},
		{"@type in a nested message", sources.Selector{}, `outlier_detection: {"@type": x}`, "cluster.outlier_detection.@type: unknown field"},
		{"bad enum", sources.Selector{}, "lb_policy: LEAST_REQUESTS", `cluster.lb_policy: unknown value "LEAST_REQUESTS" (want ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, CLUSTER_PROVIDED, LOAD_BALANCING_POLICY_CONFIG)`},
		{"bad enum in a list, camelCase key", sources.Selector{}, "circuitBreakers: {thresholds: [{priority: HIGHH}]}", `cluster.circuit_breakers.thresholds[0].priority: unknown value "HIGHH" (want DEFAULT, HIGH)`},
		{"bad duration", sources.Selector{}, "connect_timeout: soon", `cluster.connect_timeout: "soon" is not a duration: durations need a unit such as 100ms or 30s`},
		{"duration without a unit", sources.Selector{}, "outlier_detection: {interval: 10}", "cluster.outlier_detection.interval: 10 is not a duration: durations need a unit such as 100ms or 30s"},
		{"not a whole number", sources.Selector{}, "outlier_detection: {consecutive_5xx: abc}", `cluster.outlier_detection.consecutive_5xx: "abc" is not a whole number`},
		{"out of range", sources.Selector{}, "outlier_detection: {consecutive_5xx: -1}", "cluster.outlier_detection.consecutive_5xx: -1 is out of range (0 to 4294967295)"},
		{"not a bool", sources.Selector{}, "ignore_health_on_host_removal: yes", `cluster.ignore_health_on_host_removal: "yes" is not true or false`},
		{"a list for a message", sources.Selector{}, "outlier_detection: [5]", "cluster.outlier_detection: want a map of envoy.config.cluster.v3.OutlierDetection fields, not the list [5]"},
		{"bridge-owned name", sources.Selector{}, "name: other", "cluster.name: is set by the bridge"},
		{"bridge-owned type", sources.Selector{}, "type: STRICT_DNS", "cluster.type: is set by the bridge"},
		{"bridge-owned eds config", sources.Selector{}, "eds_cluster_config: {service_name: x}", "cluster.eds_cluster_config: is set by the bridge"},
		{"fails validation", sources.Selector{}, "connect_timeout: 0s", "cluster.connect_timeout: the shaped cluster is invalid: value must be greater than 0s"},
		{"panic threshold out of range", sources.Selector{}, "common_lb_config: {healthy_panic_threshold: {value: 150}}", "cluster.common_lb_config.healthy_panic_threshold.value: the shaped cluster is invalid: value must be inside range [0, 100]"},
		{"bad glob", sources.Selector{Services: []string{"web", "[a"}}, "lb_policy: RANDOM", `match.services[1]: bad glob "[a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRule(tt.match, AllClients, fragment(t, tt.fragment))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("NewRule error = %v, want one starting with %q", err, tt.want)
			}
		})
	}
}

// BenchmarkShaped measures the translation of a service of 10 endpoints
// with no rule and with the three rules of the shaped-override golden case.
func BenchmarkShaped(b *testing.B) {
	svc := sources.Service{Name: "payments", Source: "consul"}
	for i := range 10 {
		svc.Endpoints = append(svc.Endpoints, sources.Endpoint{Address: fmt.Sprintf("10.0.0.%d", i+1), Port: 8443, Health: sources.HealthHealthy})
	}
	rules := &Shaping{Rules: []Rule{
		mustRule(b, sources.Selector{}, AllClients, grpcShape),
		mustRule(b, sources.Selector{Sources: []string{"consul"}}, AllClients, edgeShape),
		mustRule(b, sources.Selector{Services: []string{"pay*"}}, EnvoyClients, "lb_policy: ROUND_ROBIN"),
	}}
	for _, bc := range []struct {
		name string
		s    *Shaping
	}{{"none", nil}, {"three-rules", rules}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Service(svc, Options{Shaping: bc.s}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
