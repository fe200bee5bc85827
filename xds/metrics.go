package xds

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the engine's Prometheus collectors. Per-type children are
// resolved once per type so that a push costs no label lookup.
type metrics struct {
	clients   *prometheus.GaugeVec
	pushes    *prometheus.CounterVec
	resources *prometheus.CounterVec
	bytes     *prometheus.CounterVec
	nacks     *prometheus.CounterVec
	refused   *prometheus.CounterVec
	apply     prometheus.Histogram
	// unknownType is shared by the private stores of every type URL the
	// server does not serve: one label value for all of them.
	unknownType *typeMetrics
}

type typeMetrics struct {
	pushes, resources, bytes, nacks prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		clients: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xdsbridge_xds_clients",
			Help: "Connected xDS streams by variant (sotw|delta _ ads|cds|eds|lds|rds).",
		}, []string{"variant"}),
		pushes:    perType("xdsbridge_xds_pushes_total", "Responses sent, by resource type."),
		resources: perType("xdsbridge_xds_resources_sent_total", "Resources carried by the responses sent, by resource type."),
		bytes:     perType("xdsbridge_xds_bytes_sent_total", "Resource bytes carried by the responses sent (delta: the Resource records; SotW: the Any messages), by resource type."),
		nacks:     perType("xdsbridge_xds_nacks_total", "Responses rejected by clients (NACK), by resource type."),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xdsbridge_xds_refused_total",
			Help: "Streams ended or refused for breaching a limit or sending an invalid request, by reason.",
		}, []string{"reason"}),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xdsbridge_xds_apply_duration_seconds",
			Help:    "Time to apply one change to the store and mark it on subscribed clients.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 4, 10),
		}),
	}
	if reg != nil {
		m.clients = register(reg, m.clients)
		m.pushes = register(reg, m.pushes)
		m.resources = register(reg, m.resources)
		m.bytes = register(reg, m.bytes)
		m.nacks = register(reg, m.nacks)
		m.refused = register(reg, m.refused)
		m.apply = register(reg, m.apply)
	}
	m.unknownType = m.forType("unknown")
	// Every series whose label values are known before the first event
	// exists from the start at zero: an alert on rate() or increase() sees
	// a series' first increment only if the series was there before it, and
	// absent() cannot tell "never happened" from "not exported".
	for _, v := range streamVariants {
		m.clients.WithLabelValues(v)
	}
	for _, r := range refusalReasons {
		m.refused.WithLabelValues(r)
	}
	for _, t := range envoyTypes {
		m.forType(shortType(t))
	}
	return m
}

// envoyTypes are the types the gRPC services serve Envoy and gRPC clients:
// their per-type series exist from the start.
var envoyTypes = []string{ClusterType, EndpointType, ListenerType, RouteType, SecretType}

// streamVariants are the label values of xdsbridge_xds_clients: one per gRPC
// service and protocol the server registers.
var streamVariants = []string{
	"sotw_ads", "delta_ads", "sotw_cds", "delta_cds", "sotw_eds", "delta_eds",
	"sotw_lds", "delta_lds", "sotw_rds", "delta_rds", "sotw_sds", "delta_sds",
}

// perType is a counter labelled by resource type.
func perType(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"type"})
}

// register registers c, or returns the collector already registered under
// its name (two servers on one registry share their metrics).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // a conflicting definition is a programming error
	}
	return c
}

// forType resolves the per-type children of label l (see shortType).
func (m *metrics) forType(l string) *typeMetrics {
	return &typeMetrics{
		pushes:    m.pushes.WithLabelValues(l),
		resources: m.resources.WithLabelValues(l),
		bytes:     m.bytes.WithLabelValues(l),
		nacks:     m.nacks.WithLabelValues(l),
	}
}
