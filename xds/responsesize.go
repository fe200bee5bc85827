package xds

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxResponseBytes is Options.MaxResponseBytes when unset: grpc-go's
// default receive limit (and Envoy's is larger), so that no client gets a
// message it cannot receive.
const DefaultMaxResponseBytes = 4 << 20

// envelopeReserve is what a response keeps free of resources for its
// envelope: version, type URL, nonce and their tags take well under 200
// bytes; the rest is margin.
const envelopeReserve = 1 << 10

// responseSize keeps every response under Options.MaxResponseBytes.
//
// Delta responses and SotW responses of EDS, RDS and other only-changed
// types carry any subset of the pending resources, so a larger set is split
// over several responses, each with its own nonce and version (ACKs of the
// earlier ones are then stale, which changes nothing). A SotW CDS or LDS
// response must list every resource at once (an absent one reads as
// deleted), so it cannot be split: it is sent, and the first such response
// of a type is logged and every one counted, since a client with a smaller
// receive limit will reject it. A single resource whose delta record alone
// exceeds the limit could never be sent: Apply refuses it, and the name
// keeps its last good version.
type responseSize struct {
	room             int // bytes of resources one response may carry
	max              int
	refusedResources *prometheus.CounterVec
	oversize         *prometheus.CounterVec

	mu     sync.Mutex
	warned map[string]bool // types whose oversize SotW response was logged
}

func newResponseSize(limit int, reg prometheus.Registerer) *responseSize {
	l := &responseSize{
		room:             limit - envelopeReserve,
		max:              limit,
		refusedResources: perType("xdsbridge_xds_refused_resources_total", "Resource versions refused because they alone exceed the response size limit; the name keeps its last good version."),
		oversize:         perType("xdsbridge_xds_oversize_responses_total", "SotW CDS/LDS responses over the response size limit (they cannot be split), by resource type."),
		warned:           map[string]bool{},
	}
	if reg != nil {
		l.refusedResources = register(reg, l.refusedResources)
		l.oversize = register(reg, l.oversize)
	}
	// The series of the served types exist from the start (see newMetrics).
	for _, t := range envoyTypes {
		l.refusedResources.WithLabelValues(shortType(t))
		l.oversize.WithLabelValues(shortType(t))
	}
	return l
}

// check is the error of an entry too large to be sent in any response.
func (l *responseSize) check(e *entry) error {
	if n := len(e.wire.Delta.ReadOnlyData()); n > l.room {
		return fmt.Errorf("%s %q is %d bytes encoded, over the response size limit of %d bytes (with %d kept for the envelope)",
			shortType(e.typ), e.name, n, l.max, envelopeReserve)
	}
	return nil
}

// noteFull records a SotW CDS/LDS response of bytes that cannot be split.
func (l *responseSize) noteFull(log *slog.Logger, t *typeState, resources, bytes int) {
	if bytes <= l.room {
		return
	}
	l.oversize.WithLabelValues(shortType(t.url)).Inc()
	l.mu.Lock()
	first := !l.warned[t.url]
	l.warned[t.url] = true
	l.mu.Unlock()
	if first {
		log.Warn("a SotW response that must list every resource exceeds the response size limit; clients with a smaller receive limit reject it (delta does not have this limit)",
			"type", t.url, "resources", resources, "bytes", bytes, "limit", l.max)
	}
}
