package fanout

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
)

// The test binary doubles as the server process (xdsserver.ServeIfChild):
// Run starts `<bin> serve --impl X`.
func TestMain(m *testing.M) {
	serveOlderIfChild()
	xdsserver.ServeIfChild()
	goleak.VerifyTestMain(m)
}

// olderEnv, set with xdsserver.ServeEnv, makes the test binary serve as an
// xdsload built before the transport flags: any other flag is refused
// (exit 2), as such a binary refuses it.
const olderEnv = "XDSLOAD_TEST_OLDER"

func serveOlderIfChild() {
	if os.Getenv(olderEnv) == "" || len(os.Args) < 2 || os.Args[1] != "serve" {
		return
	}
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	impl := fs.String("impl", "", "")
	holdoff := fs.Duration("holdoff", 0, "")
	maxHoldoff := fs.Duration("max-holdoff", 0, "")
	_ = fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	err := xdsserver.Serve(ctx, xdsserver.Options{Impl: *impl, Holdoff: *holdoff, MaxHoldoff: *maxHoldoff,
		XDS: "127.0.0.1:0", Control: "127.0.0.1:0", Ready: os.Stdout})
	stop()
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestOlderServerBinary runs an implementation named IMPL@LABEL on another
// server binary that knows only the flags older xdsload builds had, as a
// comparison of two commits' servers under one load generator does.
func TestOlderServerBinary(t *testing.T) {
	cfg := config(t, "xdsbridge@older", true)
	t.Setenv(olderEnv, "1")
	cfg.Bin, cfg.ServerBin = "/nonexistent/xdsload", os.Args[0]
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed || r.ChangesDone != 3 || r.ColdStart <= 0 {
		t.Fatalf("Failed=%v problem=%q changes=%d cold=%v", r.Failed, r.Problem, r.ChangesDone, r.ColdStart)
	}
	if cfg.ID() != "test-xdsbridge@older-delta-c4-n30" {
		t.Errorf("ID = %s, want the label kept apart from the plain implementation", cfg.ID())
	}
}

func config(t *testing.T, impl string, delta bool) Config {
	t.Helper()
	t.Setenv(xdsserver.ServeEnv, "1")
	return Config{
		Scenario: "test", Impl: impl, Delta: delta, Clients: 4, Services: 30, Endpoints: 3, Changes: 3,
		Timeout: 20 * time.Second, Bin: os.Args[0], OutDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
	}
}

func TestRunMeasuresEveryImpl(t *testing.T) {
	var results []Result
	for _, impl := range xdsserver.Impls {
		for _, delta := range []bool{true, false} {
			cfg := config(t, impl, delta)
			cfg.Reconnect = true
			t.Run(cfg.ID(), func(t *testing.T) {
				r, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if r.Failed {
					t.Fatalf("run failed: %s", r.Problem)
				}
				if r.ChangesDone != 3 || r.ConvP99 <= 0 || r.ColdStart <= 0 || r.CPUPerChange <= 0 {
					t.Errorf("figures missing: %+v", r)
				}
				// Every implementation sends at least the changed assignment.
				if r.ResPerClientChange < 1 || r.BytesPerClientChange <= 0 {
					t.Errorf("resources/client·change = %v, bytes = %v", r.ResPerClientChange, r.BytesPerClientChange)
				}
				if r.ReconnectTime <= 0 {
					t.Errorf("reconnect not measured: %+v", r)
				}
				for _, suffix := range []string{".cpu.pprof", ".heap.pprof", ".server.log"} {
					if _, err := os.Stat(cfg.OutDir + "/" + cfg.ID() + suffix); err != nil {
						t.Error(err)
					}
				}
				results = append(results, r)
			})
		}
	}
	t.Run("report", func(t *testing.T) {
		md := Markdown(results, "test machine")
		for _, want := range []string{"xdsbridge / snapshot", "xdsbridge / linear", "convergence p99", "bytes / client·change"} {
			if !strings.Contains(md, want) {
				t.Errorf("markdown lacks %q:\n%s", want, md)
			}
		}
		var csv strings.Builder
		if err := CSV(&csv, results); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(csv.String(), "\n"); n != len(results)+1 {
			t.Errorf("csv has %d lines, want %d", n, len(results)+1)
		}
		wellFormed(t, Chart(results))
	})
}

// TestWrongServerFails runs against a server that accepts changes but never
// publishes them: the run must be reported as failed, not as fast.
func TestWrongServerFails(t *testing.T) {
	cfg := config(t, "stale", true)
	cfg.Timeout = time.Second
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Failed || !strings.Contains(r.Problem, "did not reach") || !strings.Contains(r.Problem, "validation") {
		t.Errorf("Failed=%v problem=%q", r.Failed, r.Problem)
	}
	if md := Markdown([]Result{r}, ""); !strings.Contains(md, "FAILED") {
		t.Errorf("report does not say FAILED:\n%s", md)
	}
}

func TestSustainedRate(t *testing.T) {
	cfg := config(t, "xdsbridge", true)
	cfg.Changes, cfg.Rate, cfg.Duration = 0, 50, 200*time.Millisecond
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed || r.ChangesDone != 10 {
		t.Errorf("failed=%v (%s), changes=%d, want 10", r.Failed, r.Problem, r.ChangesDone)
	}
}

// TestHighRateIsOffered checks that a paced run at a rate well above one
// control call per change per millisecond posts every change, to every
// implementation with the bridge's batching, and still measures every
// change (each service changes at most once, so no change is hidden by a
// later one of the same batch). The rate it reached is a figure of the
// benchmark's report ("changes applied / s", with the driver's lag), not
// something a test on a loaded machine can bound: here it is logged.
func TestHighRateIsOffered(t *testing.T) {
	for _, impl := range xdsserver.Impls {
		t.Run(impl, func(t *testing.T) {
			cfg := config(t, impl, true)
			cfg.Services, cfg.Changes, cfg.Rate, cfg.Duration, cfg.Holdoff = 600, 0, 1000, 400*time.Millisecond, 20*time.Millisecond
			r, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Failed || r.ChangesDone != 400 {
				t.Fatalf("failed=%v (%s), changes=%d, want 400", r.Failed, r.Problem, r.ChangesDone)
			}
			t.Logf("offered %.0f changes/s of %.0f asked, at most %v behind the schedule", r.AchievedRate, cfg.Rate, r.DriverLagMax)
			if r.AchievedRate <= 0 {
				t.Errorf("rate not measured: %+v", r)
			}
			if r.Flushes < 1 || r.Flushes >= r.ChangesDone/4 {
				t.Errorf("%d changes in %d publishes, want batches", r.ChangesDone, r.Flushes)
			}
			if r.ConvP99First <= 0 || r.ConvP99Last <= 0 {
				t.Errorf("backlog figures missing: first %v, last %v", r.ConvP99First, r.ConvP99Last)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	impls := []string{"xdsbridge", "snapshot"}
	for _, tc := range []struct {
		name      string
		preset    string
		scenarios []string
		over      Sizes
		runs      int
		check     func([]Config) error
	}{
		{"quick is S1+S2", "quick", nil, Sizes{}, 2*3 + 3*2, func(cs []Config) error {
			for _, c := range cs {
				if c.Scenario != "S1" && c.Scenario != "S2" {
					return errors.New("unexpected scenario " + c.Scenario)
				}
			}
			return nil
		}},
		// Every scenario for both implementations, plus the scale rows
		// (S1 at C=2,000 and S5 at N=10,000 in both modes, S7) for
		// xdsbridge alone, plus the floor beside xdsbridge wherever CPU
		// is stated against it: S1 and S3 (per client·change, the scale
		// rows too), S6 (per cold start) and S7.
		{"full has all", "full", nil, Sizes{}, (2+3+4+3+2+1)*2 + (2 + 2 + 1) + (2 + 2 + 4 + 1 + 1), func(cs []Config) error {
			for _, c := range cs {
				scale := (c.Scenario == "S1" && c.Clients == 2000) || (c.Scenario == "S5" && c.Services == 10000) || c.Scenario == "S7"
				if scale && c.Impl != "xdsbridge" && c.Impl != "floor" {
					return fmt.Errorf("scale row %s runs %s", c.ID(), c.Impl)
				}
			}
			for _, sc := range []string{"S1", "S3", "S6", "S7"} {
				if !slices.ContainsFunc(cs, func(c Config) bool { return c.Scenario == sc && c.Impl == "floor" }) {
					return errors.New(sc + " without the floor")
				}
			}
			return nil
		}},
		{"overridden sizes add no scale rows", "full", []string{"S1", "S5"}, Sizes{Clients: 50, Services: 100}, 2*3 + 2*2, nil},
		{"override clients", "quick", []string{"S1"}, Sizes{Clients: 7}, 6, func(cs []Config) error {
			for _, c := range cs {
				if c.Clients != 7 {
					return errors.New("clients not overridden")
				}
			}
			return nil
		}},
		{"S4 is rates", "full", []string{"S4"}, Sizes{}, 6, func(cs []Config) error {
			if cs[0].Rate != 100 || cs[0].Duration != time.Minute {
				return errors.New("S4 is not 100/s for 60s")
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := Plan(tc.preset, tc.scenarios, impls, tc.over)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != tc.runs {
				t.Errorf("%d runs, want %d", len(cs), tc.runs)
			}
			if tc.check != nil {
				if err := tc.check(cs); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if _, err := Plan("huge", nil, impls, Sizes{}); err == nil {
		t.Error("unknown preset accepted")
	}
	if _, err := Plan("full", []string{"S9"}, impls, Sizes{}); err == nil {
		t.Error("unknown scenario accepted")
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 3}, {99, 5}, {100, 5}, {1, 1}} {
		if got := report.Pct(ds, tc.p); got != tc.want {
			t.Errorf("pct(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if report.Pct(nil, 50) != 0 {
		t.Error("pct of nothing")
	}
}

func wellFormed(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
	}
}

func TestChartPanels(t *testing.T) {
	var rs []Result
	for _, impl := range []string{"xdsbridge", "snapshot", "linear"} {
		for _, n := range []int{100, 1000, 10000} {
			r := Result{Config: Config{Scenario: "S2", Impl: impl, Delta: true, Clients: 200, Services: n}}
			r.ConvP99, r.CPUPerChange, r.BytesPerClientChange = time.Duration(n)*time.Microsecond, time.Millisecond, 500
			rs = append(rs, r)
		}
		for _, delta := range []bool{true, false} {
			r := Result{Config: Config{Scenario: "S1", Impl: impl, Delta: delta, Clients: 200, Services: 1000}}
			r.ConvP99, r.CPUPerClientChange, r.BytesPerClientChange = 10*time.Millisecond, 100*time.Microsecond, 600
			rs = append(rs, r)
		}
	}
	svg := Chart(rs)
	wellFormed(t, svg)
	// 3 S1 bar panels and 3 S2 line panels.
	if n := strings.Count(svg, "<g transform"); n != 6 {
		t.Errorf("%d panels, want 6", n)
	}
	if n := strings.Count(svg, "<polyline"); n != 9 {
		t.Errorf("%d lines, want 9 (3 panels x 3 impls)", n)
	}
}

func TestTargets(t *testing.T) {
	mk := func(sc, impl string, delta bool, f func(*Result)) Result {
		r := Result{Config: Config{Scenario: sc, Impl: impl, Delta: delta, Clients: 1000, Services: 1000}}
		f(&r)
		return r
	}
	rs := []Result{
		mk("S1", "xdsbridge", true, func(r *Result) {
			r.ConvP99, r.CPUPerClientChange, r.HeapPerClient = 5*time.Millisecond, 100*time.Microsecond, 50e3
		}),
		mk("S1", "snapshot", true, func(r *Result) { r.ConvP99 = 100 * time.Millisecond }),
		mk("S1", "xdsbridge", false, func(r *Result) {
			r.CPUPerClientChange, r.HeapPerClient, r.BytesPerClientChange = 300*time.Microsecond, 50e3, 500
		}),
		mk("S2", "xdsbridge", true, func(r *Result) { r.Services, r.CPUPerChange = 100, 10*time.Millisecond }),
		mk("S2", "xdsbridge", true, func(r *Result) { r.Services, r.CPUPerChange = 1000, 11*time.Millisecond }),
		mk("S2", "xdsbridge", true, func(r *Result) { r.Services, r.CPUPerChange = 10000, 20*time.Millisecond }),
	}
	rs = append(rs,
		mk("S5", "xdsbridge", true, func(r *Result) { r.Services, r.PeakRSS, r.ReconnectTime = 10000, 3e9, 30*time.Second }),
		mk("S5", "xdsbridge", true, func(r *Result) { r.PeakRSS = 1e8 }), // smaller: not the one judged
		mk("S5", "xdsbridge-unbudgeted", true, func(r *Result) { r.Services, r.ReconnectTime = 10000, 20*time.Second }),
		mk("S6", "xdsbridge", true, func(r *Result) { r.Services, r.ColdCPU, r.ColdStart = 10000, 4*time.Second, 60*time.Second }),
		mk("S6", "floor", true, func(r *Result) { r.Services, r.ColdStart = 10000, 55*time.Second }),
		mk("S6", "linear", true, func(r *Result) { r.Services, r.ColdStart = 10000, 100*time.Second }),
		mk("S7", "xdsbridge", true, func(r *Result) {
			r.Clients, r.PeakRSS, r.ConvP99, r.ServerRSS, r.CPUPerClientChange = 10000, 9e8, 1500*time.Millisecond, 350e6, 50*time.Microsecond
		}),
		mk("S7", "floor", true, func(r *Result) { r.Clients, r.CPUPerClientChange = 10000, 20*time.Microsecond }),
		mk("S1", "floor", true, func(r *Result) { r.CPUPerClientChange = 60 * time.Microsecond }),
		mk("S1", "floor", false, func(r *Result) { r.CPUPerClientChange, r.Failed = 100*time.Microsecond, true }),
	)
	rs[0].ServerRSS = 120e6
	out := Targets(rs)
	for _, tc := range []struct{ name, line, verdict string }{
		{"S5 peak from the largest run", "S5 delta reconnect peak RSS", "**missed** (3.00× the target)"},
		{"S5 budget cost", "with the budget ≤ 1.2×", "**missed** (1.25× the target)"},
		{"S6 CPU", "S6 server CPU", "| met |"},
		{"S6 floor", "≤ 1.2× floor", "| met |"},
		{"S6 linear", "≤ 0.5× linear", "**missed** (1.20× the target)"},
		{"steady RSS", "process RSS ≤ 100 KB", "**missed** (1.20× the target)"},
		{"S7 RSS", "S7 peak RSS", "| met |"},
		{"S7 p99", "S7 convergence p99", "**missed** (1.50× the target)"},
		{"S7 RSS per client", "S7 process RSS ≤ 30 KB per client", "**missed** (1.17× the target)"},
		{"floor ratio at C=1,000", "100.0 µs vs 60.0 µs = 1.67× (C=1000, N=1000)", "| met |"},
		{"floor ratio at C=10,000", "50.0 µs vs 20.0 µs = 2.50× (C=10000, N=1000)", "**missed** (1.25× the target)"},
		{"p99 ratio met", "S1 delta convergence p99", "| met |"},
		{"delta CPU met", "S1 delta server CPU", "| met |"},
		{"sotw CPU missed by 2x", "S1 sotw server CPU", "**missed** (2.00× the target)"},
		{"sotw bytes met", "S1 SotW EDS bytes", "| met |"},
		{"S2 flat", "N 100 → 1000", "| met |"},
		{"S2 grows", "N 1000 → 10000", "**missed**"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for l := range strings.SplitSeq(out, "\n") {
				if strings.Contains(l, tc.line) {
					if !strings.Contains(l, tc.verdict) {
						t.Errorf("line %q lacks %q", l, tc.verdict)
					}
					return
				}
			}
			t.Errorf("no line for %q in\n%s", tc.line, out)
		})
	}
	if strings.Contains(out, "sotw server CPU per client·change ≤ 2× the floor") {
		t.Errorf("a failed floor run is compared against:\n%s", out)
	}
}

// TestWarmup checks that the warm-up is the plan's largest configuration,
// cut to a cold start and one change, and that a suite with it records
// only its own runs.
func TestWarmup(t *testing.T) {
	runs, err := Plan("full", []string{"S1", "S6"}, []string{"xdsbridge"}, Sizes{})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := warmup(runs)
	if !ok || w.Clients != 1000 || w.Services != 10000 || w.Changes != 1 || w.Reconnect || w.Rate != 0 || w.Scenario != "warmup" {
		t.Errorf("warm-up %+v, want S6's C=1,000 × N=10,000 with one change", w)
	}
	if _, ok := warmup(nil); ok {
		t.Error("a warm-up for no runs")
	}
	cfg := config(t, "xdsbridge", true)
	cfg.Changes = 2
	dir := t.TempDir()
	s := Suite{Runs: []Config{cfg}, Bin: cfg.Bin, OutDir: dir, Timeout: cfg.Timeout, Logger: cfg.Logger, Warmup: true}
	results, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Failed || results[0].Scenario != "test" || results[0].Wall <= 0 {
		t.Fatalf("results %+v, want the one recorded run", results)
	}
	if _, err := os.Stat(filepath.Join(dir, "profiles", "warmup-xdsbridge-delta-c4-n30.server.log")); err != nil {
		t.Errorf("the warm-up did not run: %v", err)
	}
}

// TestMarkdownRepetitions checks that repeated runs of a configuration are
// reported once, by their median run, and compared with the baseline's
// median run.
func TestMarkdownRepetitions(t *testing.T) {
	var rs []Result
	for rep, cold := range []time.Duration{30 * time.Second, 10 * time.Second, 20 * time.Second} {
		for _, impl := range []string{"xdsbridge", "floor"} {
			r := Result{Config: Config{Scenario: "S6", Impl: impl, Delta: true, Clients: 10, Services: 10, Rep: rep}, ColdStart: cold, Wall: time.Second}
			if impl == "floor" {
				r.ColdStart *= 2
			}
			rs = append(rs, r)
		}
	}
	rs[0].Failed = true // xdsbridge's 30 s run: sorted last, never the median
	md := Markdown(rs, "")
	if !strings.Contains(md, "| cold start | 20.0 s | 40.0 s | 0.50× |") {
		t.Errorf("want one column per implementation with its median run:\n%s", md)
	}
	if !strings.Contains(md, "Wall time: 6s for 6 runs") {
		t.Errorf("the wall time is not the sum of every run:\n%s", md)
	}
}
