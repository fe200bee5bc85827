package admin

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
)

func TestShadowedMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(SourceCollector{Sources: func() []manager.SourceStatus {
		return []manager.SourceStatus{{StatusSnapshot: sources.StatusSnapshot{Name: "consul"}, Shadowed: 3, ShadowedServices: []string{"a", "b", "c"}}}
	}})
	h := Handler(Options{Gatherer: reg, Pending: func() []string { return nil },
		Sources: func() []manager.SourceStatus { return nil }, Clients: func() any { return nil }})
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, `xdsbridge_source_shadowed_services{source="consul"} 3`) {
		t.Errorf("/metrics lacks the shadowed gauge:\n%s", body)
	}
}
