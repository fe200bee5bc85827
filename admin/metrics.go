package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/sources"
)

// SourceCollector exports the status of every source as metrics, read at
// scrape time so that they are never out of date.
type SourceCollector struct {
	// Sources returns the status of every source.
	Sources func() []sources.StatusSnapshot
}

var _ prometheus.Collector = SourceCollector{}

var (
	staleDesc = prometheus.NewDesc("xdsbridge_source_stale",
		"1 while the source's last read failed and it serves the state of its last good read.", []string{"source"}, nil)
	syncedDesc = prometheus.NewDesc("xdsbridge_source_synced",
		"1 once the source completed its first read.", []string{"source"}, nil)
	lastSuccessDesc = prometheus.NewDesc("xdsbridge_source_last_success_timestamp_seconds",
		"Unix time of the source's last successful read (0 if none).", []string{"source"}, nil)
	failuresDesc = prometheus.NewDesc("xdsbridge_source_failures_total",
		"Failed reads of the source.", []string{"source"}, nil)
	droppedDesc = prometheus.NewDesc("xdsbridge_source_dropped_endpoints_total",
		"Endpoints the source could not serve and left out.", []string{"source"}, nil)
)

// Describe implements prometheus.Collector.
func (SourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{staleDesc, syncedDesc, lastSuccessDesc, failuresDesc, droppedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c SourceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.Sources() {
		var last float64
		if !s.LastSuccess.IsZero() {
			last = float64(s.LastSuccess.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, bool01(s.Stale), s.Name)
		ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, bool01(s.Synced), s.Name)
		ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, last, s.Name)
		ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(s.Failures), s.Name)
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(s.Dropped), s.Name)
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
