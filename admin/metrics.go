package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/manager"
)

// SourceCollector exports the status of every source as metrics, read at
// scrape time so that they are never out of date.
type SourceCollector struct {
	// Sources returns the status of every source.
	Sources func() []manager.SourceStatus
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
		"Failed reads of the source since it started, every one (the status page and /sources count those of the current failing period).", []string{"source"}, nil)
	droppedDesc = prometheus.NewDesc("xdsbridge_source_dropped_endpoints_total",
		"Endpoints the source could not serve and left out.", []string{"source"}, nil)
	heldDesc = prometheus.NewDesc("xdsbridge_source_guard_held",
		"Services and endpoints the removal guard keeps serving although the source no longer reports them.", []string{"source", "kind"}, nil)
	holdingDesc = prometheus.NewDesc("xdsbridge_source_guard_holding",
		"1 while the source's removal guard holds a change (see /sources, guard): removals wait for the source to bring the services back, for the hold to expire or for POST /guard/confirm.", []string{"source"}, nil)
	holdsDesc = prometheus.NewDesc("xdsbridge_source_guard_holds_total",
		"Holds the removal guard started: the source emptied, lost most of its services at once, or reported a registry reset.", []string{"source"}, nil)
	phaseDesc = prometheus.NewDesc("xdsbridge_source_startup_phase",
		"1 for the source's startup phase: waiting, synced, warm (serving persisted state), timed_out (served empty, or a changed source's previous state), or replacing (a changed source's previous instance serves until the new one syncs).", []string{"source", "phase"}, nil)
	shadowedDesc = prometheus.NewDesc("xdsbridge_source_shadowed_services",
		"Services the source reports with endpoints that the merge does not serve (a source of higher precedence wins, or a weighted rule leaves the source out).", []string{"source"}, nil)
	serviceErrorsDesc = prometheus.NewDesc("xdsbridge_source_service_errors",
		"Services of the source whose latest version cannot be served (their last good version is).", []string{"source"}, nil)
)

// Describe implements prometheus.Collector.
func (SourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{staleDesc, syncedDesc, lastSuccessDesc, failuresDesc, droppedDesc,
		heldDesc, holdingDesc, holdsDesc, phaseDesc, serviceErrorsDesc, shadowedDesc} {
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
		ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(s.FailuresTotal), s.Name)
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(s.Dropped), s.Name)
		ch <- prometheus.MustNewConstMetric(shadowedDesc, prometheus.GaugeValue, float64(s.Shadowed), s.Name)
		collectPolicy(ch, s)
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectPolicy exports what the manager records about a source: its
// startup phase, removal guard and failing services.
func collectPolicy(ch chan<- prometheus.Metric, s manager.SourceStatus) {
	var svcs, eps float64
	if g := s.Guard; g != nil {
		svcs, eps = float64(g.HeldServices), float64(g.HeldEndpoints)
	}
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, svcs, s.Name, "services")
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, eps, s.Name, "endpoints")
	ch <- prometheus.MustNewConstMetric(holdingDesc, prometheus.GaugeValue, bool01(s.Guard != nil), s.Name)
	ch <- prometheus.MustNewConstMetric(holdsDesc, prometheus.CounterValue, float64(s.GuardHolds), s.Name)
	for _, p := range []string{manager.PhaseWaiting, manager.PhaseSynced, manager.PhaseWarm, manager.PhaseTimedOut, manager.PhaseReplacing} {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, bool01(s.Startup == p), s.Name, p)
	}
	ch <- prometheus.MustNewConstMetric(serviceErrorsDesc, prometheus.GaugeValue, float64(len(s.ServiceErrors)), s.Name)
}
