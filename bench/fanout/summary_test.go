package fanout

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// TestSummarizeRepeats checks that repeated runs written by CSV come back
// as median (min–max), that failed runs are counted apart, and that
// per-client cold CPU is derived.
func TestSummarizeRepeats(t *testing.T) {
	var rs []Result
	for rep, p99 := range []time.Duration{30, 10, 20} {
		rs = append(rs, Result{Config: Config{Scenario: "S1", Impl: "xdsbridge", Delta: true, Clients: 10, Services: 5, Rep: rep},
			ConvP99: p99 * time.Millisecond, ColdCPU: time.Duration(rep+1) * 10 * time.Millisecond})
	}
	rs = append(rs, Result{Config: Config{Scenario: "S1", Impl: "xdsbridge", Delta: true, Clients: 10, Services: 5, Rep: 3}, ConvP99: time.Hour, Failed: true})
	out := summarize(t, rs)
	for _, want := range []string{"#### S1 delta C=10 N=5", "| xdsbridge | 3 (+1 failed) |", "20.0 ms (10.0 ms–30.0 ms)", "2.0 ms (1.0 ms–3.0 ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// TestSummarizeFloorRatio checks the ratios to the floor, of server CPU
// and of convergence: from the medians of the runs that did not fail, and
// round by round.
func TestSummarizeFloorRatio(t *testing.T) {
	var rs []Result
	for rep, cpu := range []time.Duration{60, 40, 50} {
		cfg := Config{Scenario: "S7", Delta: true, Clients: 10, Services: 5, Rep: rep}
		cfg.Impl = "xdsbridge"
		rs = append(rs, Result{Config: cfg, CPUPerClientChange: 2 * cpu * time.Microsecond, ConvP99: 3 * cpu * time.Millisecond})
		cfg.Impl = "floor"
		rs = append(rs, Result{Config: cfg, CPUPerClientChange: cpu * time.Microsecond, ConvP99: 2 * cpu * time.Millisecond})
	}
	rs = append(rs, Result{Config: Config{Scenario: "S7", Impl: "floor", Delta: true, Clients: 10, Services: 5, Rep: 3},
		CPUPerClientChange: time.Microsecond, ConvP99: time.Millisecond, Failed: true})
	out := summarize(t, rs)
	for _, want := range []string{
		"xdsbridge / floor, server CPU per client·change: 2.00× (medians 100.0 µs / 50.0 µs); by round 2.00×, 2.00×, 2.00×.",
		"xdsbridge / floor, convergence p99: 1.50× (medians 150.0 ms / 100.0 ms); by round 1.50×, 1.50×, 1.50×.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// TestSummarizeFloorRatioAcrossInvocations checks that runs of separate
// invocations, which all number their repetitions from zero, each count
// in the medians, and are not paired into rounds.
func TestSummarizeFloorRatioAcrossInvocations(t *testing.T) {
	var csvs []io.Reader
	for _, cpu := range []time.Duration{30, 40, 80} {
		cfg := Config{Scenario: "run", Delta: true, Clients: 10, Services: 5}
		var in bytes.Buffer
		rs := []Result{{Config: cfg, CPUPerClientChange: cpu * time.Microsecond}}
		rs[0].Impl = "xdsbridge"
		if cpu == 30 {
			cfg.Impl = "floor"
			rs = append(rs, Result{Config: cfg, CPUPerClientChange: 20 * time.Microsecond})
		}
		if err := CSV(&in, rs); err != nil {
			t.Fatal(err)
		}
		csvs = append(csvs, &in)
	}
	var out bytes.Buffer
	if err := Summarize(&out, csvs...); err != nil {
		t.Fatal(err)
	}
	want := "xdsbridge / floor, server CPU per client·change: 2.00× (medians 40.0 µs / 20.0 µs)."
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, out.String())
	}
}

// summarize writes rs as a CSV and returns its summary.
func summarize(t *testing.T, rs []Result) string {
	t.Helper()
	var in, out bytes.Buffer
	if err := CSV(&in, rs); err != nil {
		t.Fatal(err)
	}
	if err := Summarize(&out, &in); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
