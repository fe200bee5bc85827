package bridge_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// TestMetricsBeforeAnyEvent checks that the series whose label values are
// known exist at zero before their first event, so that rate(), increase()
// and absent() see a first refusal, NACK or failed certificate reload, and
// that the build and readiness are exported.
func TestMetricsBeforeAnyEvent(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte("services: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := staticBridge(t, dir, "path: services.yaml")
	m := bridgetest.ScrapeMetrics(t, "http://"+in.AdminAddr().String()+"/metrics", "")
	var want []string
	for _, r := range []string{"no_type_url", "unknown_types", "names_per_request", "names_per_subscription",
		"unknown_names", "streams", "streams_per_connection", "request_bytes"} {
		want = append(want, `xdsbridge_xds_refused_total{reason="`+r+`"}`)
	}
	for _, v := range []string{"sotw_ads", "delta_ads", "sotw_cds", "delta_cds", "sotw_eds", "delta_eds", "sotw_lds", "delta_lds", "sotw_rds", "delta_rds"} {
		want = append(want, `xdsbridge_xds_clients{variant="`+v+`"}`)
	}
	for _, typ := range []string{"cluster", "endpoint", "listener", "route"} {
		for _, name := range []string{"pushes", "resources_sent", "bytes_sent", "nacks", "refused_resources", "oversize_responses"} {
			want = append(want, fmt.Sprintf(`xdsbridge_xds_%s_total{type="%s"}`, name, typ))
		}
	}
	want = append(want, `xdsbridge_tls_reload_failures_total{key="xds.tls"}`, `xdsbridge_tls_reload_failures_total{key="admin.tls"}`,
		"xdsbridge_xds_identity_denied_total", `xdsbridge_source_guard_holding{source="static"}`,
		`xdsbridge_xds_clients_by_state{state="current"}`, `xdsbridge_xds_clients_by_state{state="behind"}`,
		`xdsbridge_xds_clients_by_state{state="nacking"}`,
		"xdsbridge_state_dir_configured", "xdsbridge_state_dir_failing", "xdsbridge_state_dir_write_failures_total",
		"xdsbridge_state_dir_load_failed")
	for _, series := range want {
		if v, ok := m.Values[series]; !ok || v != 0 {
			t.Errorf("%s = %v (exported: %v), want 0 from the start", series, v, ok)
		}
	}
	if v := m.Values["xdsbridge_ready"]; v != 1 {
		t.Errorf("xdsbridge_ready = %v on a ready bridge, want 1", v)
	}
	info := fmt.Sprintf(`xdsbridge_build_info{goversion="%s",revision="unknown",version="%s"}`, runtime.Version(), bridgetest.Version)
	if v := m.Values[info]; v != 1 {
		t.Errorf("%s = %v, want 1; build info series: %v", info, v, m.Family("xdsbridge_build_info"))
	}
}

// TestClientStatesMetric checks that xdsbridge_xds_clients_by_state counts
// a client that ACKs everything as current and one that rejects every
// assignment as nacking, as the status page classifies them.
func TestClientStatesMetric(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"),
		[]byte("services:\n  - {name: web, endpoints: [{address: 10.0.0.1, port: 80}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := staticBridge(t, dir, "path: services.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Patience)
	defer cancel()
	for _, opts := range []envoysim.Options{{Node: "good"}, {Node: "bad", Reject: rejectAssignments}} {
		opts.Addr = in.XDSAddr().String()
		c, err := envoysim.Start(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	url := "http://" + in.AdminAddr().String() + "/metrics"
	var m bridgetest.Scrape
	bridgetest.Eventually(t, bridgetest.Patience, "one client current and one nacking", func() bool {
		m = bridgetest.ScrapeMetrics(t, url, "")
		return m.Values[`xdsbridge_xds_clients_by_state{state="current"}`] == 1 &&
			m.Values[`xdsbridge_xds_clients_by_state{state="nacking"}`] == 1
	})
	if v := m.Values[`xdsbridge_xds_clients_by_state{state="behind"}`]; v != 0 {
		t.Errorf("behind = %v, want 0", v)
	}
}
