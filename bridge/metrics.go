package bridge

import (
	"cmp"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/admin"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/xds"
)

// buildInfo is the constant 1 of xdsbridge_build_info, labelled with what
// identifies the binary: dashboards show it, and a join on it tells which
// version raised an alert.
func buildInfo(b Build) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xdsbridge_build_info",
		Help: "Always 1; its labels name the version (as `bridge version` prints it), the source revision and the Go version of the running binary.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "revision": cmp.Or(b.Revision, "unknown"), "goversion": runtime.Version(),
		},
	})
	g.Set(1)
	return g
}

// readiness is xdsbridge_ready: what /readyz answers, as a metric, so that
// an alert need not probe the admin listener.
func readiness(pending func() []string) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "xdsbridge_ready",
		Help: "1 once the readiness gate opened (every source synced, or see startup); until then the xDS server answers no request.",
	}, func() float64 {
		if len(pending()) > 0 {
			return 0
		}
		return 1
	})
}

// clientStates exports how many xDS streams are current, behind or NACKing,
// as the status page classifies them (admin.ClientRow.State), read at
// scrape time.
type clientStates struct {
	progress func() []xds.ClientStatus
}

var clientStatesDesc = prometheus.NewDesc("xdsbridge_xds_clients_by_state",
	"Connected xDS streams by state: current (has ACKed everything sent), behind (responses not yet ACKed or changes not yet sent) or nacking (its latest rejection stands).",
	[]string{"state"}, nil)

// Describe implements prometheus.Collector.
func (clientStates) Describe(ch chan<- *prometheus.Desc) { ch <- clientStatesDesc }

// Collect implements prometheus.Collector. Every state is exported, at 0
// when no stream is in it.
func (c clientStates) Collect(ch chan<- prometheus.Metric) {
	n := map[string]int{admin.StateCurrent: 0, admin.StateBehind: 0, admin.StateNACKing: 0}
	for _, s := range c.progress() {
		n[clientRow(s).State()]++
	}
	for state, count := range n {
		ch <- prometheus.MustNewConstMetric(clientStatesDesc, prometheus.GaugeValue, float64(count), state)
	}
}

// stateDirMetrics exports how persisting the state for warm starts goes, read at
// scrape time. Every series exists from the start, at 0 without a
// state_dir, so that an alert on a failing one needs no series to appear.
type stateDirMetrics struct {
	status func() manager.StateDirStatus
}

var (
	stateDirConfigured = prometheus.NewDesc("xdsbridge_state_dir_configured",
		"1 when state_dir is set: the state is persisted for warm starts.", nil, nil)
	stateDirFailing = prometheus.NewDesc("xdsbridge_state_dir_failing",
		"1 while the latest write of the state to state_dir failed (the bridge serves as usual; a restart would miss the state since).", nil, nil)
	stateDirFailures = prometheus.NewDesc("xdsbridge_state_dir_write_failures_total",
		"Writes of the state to state_dir that failed.", nil, nil)
	stateDirWritten = prometheus.NewDesc("xdsbridge_state_dir_last_write_timestamp_seconds",
		"Unix time of the last write of the state to state_dir (0 if none).", nil, nil)
	stateDirLoadFailed = prometheus.NewDesc("xdsbridge_state_dir_load_failed",
		"1 when the state found in state_dir at startup could not be read and was ignored: the bridge started without it.", nil, nil)
)

// Describe implements prometheus.Collector.
func (stateDirMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDirConfigured
	ch <- stateDirFailing
	ch <- stateDirFailures
	ch <- stateDirWritten
	ch <- stateDirLoadFailed
}

// Collect implements prometheus.Collector.
func (c stateDirMetrics) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	written := 0.0
	if !st.Saved.IsZero() {
		written = float64(st.Saved.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(stateDirConfigured, prometheus.GaugeValue, bit(st.Enabled))
	ch <- prometheus.MustNewConstMetric(stateDirFailing, prometheus.GaugeValue, bit(st.Failing))
	ch <- prometheus.MustNewConstMetric(stateDirFailures, prometheus.CounterValue, float64(st.Failures))
	ch <- prometheus.MustNewConstMetric(stateDirWritten, prometheus.GaugeValue, written)
	ch <- prometheus.MustNewConstMetric(stateDirLoadFailed, prometheus.GaugeValue, bit(st.LoadError != ""))
}
