package fanout

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
)

// Scenarios in order. S7 is the stretch row: ten thousand light clients
// on one machine, for xdsbridge alone.
var Scenarios = []string{"S1", "S2", "S3", "S4", "S5", "S6", "S7"}

// Sizes overrides the sizes of a preset; zero fields keep the preset's.
type Sizes struct {
	Clients, Services, Endpoints, Changes int
	Rate                                  float64
	Duration                              time.Duration
	// Holdoff, if set, replaces the server-side holdoff of every run;
	// negative means none. S4 defaults to 100ms (the bridge's default), the
	// other scenarios to none.
	Holdoff time.Duration
}

// Plan lists the runs of the chosen scenarios of a preset ("quick", the
// reduced S1+S2 of `make bench`, or "full") for each implementation.
func Plan(preset string, scenarios, impls []string, over Sizes) ([]Config, error) {
	var quick bool
	switch preset {
	case "quick":
		quick = true
	case "full":
	default:
		return nil, fmt.Errorf("unknown preset %q (want quick or full)", preset)
	}
	if len(scenarios) == 0 {
		scenarios = Scenarios
		if quick {
			scenarios = []string{"S1", "S2"}
		}
	}
	pick := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	e := pick(over.Endpoints, 10)
	var out []Config
	// The scale rows of the full preset (S1 at twice the clients, S5 at
	// ten times the services, S7) run the engine's own implementations
	// (and the floor, below) only: the stock caches take hours at those
	// sizes, and are compared at the standard ones.
	own := slices.DeleteFunc(slices.Clone(impls), func(s string) bool { return !strings.HasPrefix(s, "xdsbridge") })
	// The scenarios whose figures are stated against what gRPC costs
	// (S1, S3 and S7 per client·change, S6 per cold start) run the floor
	// beside xdsbridge, at the scale rows too: it is cheap, and a ratio
	// is only meaningful within one invocation on a shared machine.
	withFloor := func(impls []string) []string {
		if slices.Contains(impls, "xdsbridge") && !slices.Contains(impls, "floor") {
			return append(slices.Clone(impls), "floor")
		}
		return impls
	}
	addFor := func(sc string, impls []string, delta bool, c, n, changes int, mod func(*Config)) {
		for _, impl := range impls {
			cfg := Config{Scenario: sc, Impl: impl, Delta: delta, Clients: c, Services: n, Endpoints: e, Changes: changes}
			if quick {
				cfg.ChangeBudget = 30 * time.Second
			}
			if mod != nil {
				mod(&cfg)
			}
			out = append(out, cfg)
		}
	}
	add := func(sc string, delta bool, c, n, changes int, mod func(*Config)) {
		addFor(sc, impls, delta, c, n, changes, mod)
	}
	for _, sc := range scenarios {
		switch sc {
		case "S1": // single-endpoint changes, delta and SotW
			c, n, k := pick(over.Clients, 1000), pick(over.Services, 1000), pick(over.Changes, 50)
			if quick {
				c, k = pick(over.Clients, 200), pick(over.Changes, 20)
			}
			addFor(sc, withFloor(impls), true, c, n, k, nil)
			addFor(sc, withFloor(impls), false, c, n, k, nil)
			if !quick && over.Clients == 0 {
				addFor(sc, withFloor(own), true, 2*c, n, k, nil)
				addFor(sc, withFloor(own), false, 2*c, n, k, nil)
			}
		case "S2": // cost flat in N
			c, k := pick(over.Clients, 200), pick(over.Changes, 30)
			if quick {
				// 10,000 services to 200 clients is 2M resources to send
				// at cold start: too long for the 5-minute budget.
				c, k = pick(over.Clients, 50), pick(over.Changes, 20)
			}
			for _, n := range []int{100, 1000, 10000} {
				add(sc, true, c, n, k, nil)
			}
		case "S3": // cost vs C
			n, k := pick(over.Services, 1000), pick(over.Changes, 30)
			for _, c := range []int{100, 500, 1000, 2000} {
				addFor(sc, withFloor(impls), true, c, n, k, nil)
			}
		case "S4": // sustained churn: the 100/s target, then higher rates to find where it stops being bounded
			type step struct {
				rate float64
				d    time.Duration
			}
			steps := []step{{100, 60 * time.Second}, {300, 20 * time.Second}, {1000, 20 * time.Second}}
			if over.Rate > 0 {
				steps = []step{{over.Rate, cmp.Or(over.Duration, 60*time.Second)}}
			}
			for _, st := range steps {
				// Every implementation gets the bridge's batching (see
				// Config.Holdoff): the bridge never applies source
				// changes one by one, and neither would a fair user of
				// the stock caches.
				add(sc, true, pick(over.Clients, 1000), pick(over.Services, 1000), 0, func(c *Config) {
					c.Rate, c.Duration, c.Holdoff = st.rate, st.d, manager.DefaultHoldoff
				})
			}
		case "S5": // everyone reconnects at once
			reconnect := func(c *Config) { c.Reconnect = true }
			for _, delta := range []bool{true, false} {
				add(sc, delta, pick(over.Clients, 1000), pick(over.Services, 1000), pick(over.Changes, 5), reconnect)
			}
			if !quick && over.Services == 0 { // a reconnect's cost in the size of the state it claims
				for _, delta := range []bool{true, false} {
					addFor(sc, own, delta, pick(over.Clients, 1000), 10000, pick(over.Changes, 5), reconnect)
				}
			}
		case "S6": // cold start, against the floor of what gRPC costs to deliver it
			addFor(sc, withFloor(impls), true, pick(over.Clients, 1000), pick(over.Services, 10000), 0, nil)
		case "S7": // stretch: as many clients as one 2-CPU machine holds
			addFor(sc, withFloor(own), true, pick(over.Clients, 10000), pick(over.Services, 1000), pick(over.Changes, 10), nil)
		default:
			return nil, fmt.Errorf("unknown scenario %q (want one of %v)", sc, Scenarios)
		}
	}
	if over.Holdoff != 0 {
		for i := range out {
			out[i].Holdoff = max(over.Holdoff, 0)
		}
	}
	return out, nil
}

// Suite runs a plan and writes its report.
type Suite struct {
	Runs    []Config
	Bin     string
	OutDir  string
	Timeout time.Duration
	Logger  *slog.Logger
	// Machine describes where the suite ran, for the report.
	Machine string
	// Warmup runs the plan's largest configuration once, unrecorded,
	// before the first run. The fleet lives in this process, and on the
	// machines measured here the first run of an invocation took up to
	// twice as long as the same run repeated, for every server: the
	// memory the fleet first touches is slow to come (a VM's pages backed
	// on first use, most likely). Without it the first implementation of
	// a suite pays for all of them.
	Warmup bool
}

// warmup is the configuration Suite.Warmup runs: the largest of the plan
// (clients × resources), cold start and one change only.
func warmup(runs []Config) (Config, bool) {
	if len(runs) == 0 {
		return Config{}, false
	}
	size := func(c Config) int { return c.Clients * c.Services * max(c.Endpoints, 1) }
	w := slices.MaxFunc(runs, func(a, b Config) int { return size(a) - size(b) })
	w.Scenario, w.Changes, w.Rate, w.Duration, w.Reconnect, w.ChangeBudget = "warmup", 1, 0, 0, false, 0
	return w, true
}

// Run performs the runs one after the other, writing the report after each
// so that an interrupted suite still leaves its figures. It returns the
// results; failed runs are in them with Failed set.
func (s Suite) Run(ctx context.Context) ([]Result, error) {
	if err := os.MkdirAll(filepath.Join(s.OutDir, "profiles"), 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	if w, ok := warmup(s.Runs); ok && s.Warmup {
		w.Bin, w.Logger, w.Timeout, w.OutDir = s.Bin, s.Logger, s.Timeout, filepath.Join(s.OutDir, "profiles")
		s.Logger.Info("warm-up, not recorded", "id", w.ID())
		started := time.Now()
		r, err := Run(ctx, w)
		if err != nil && ctx.Err() != nil {
			return nil, err
		}
		// A failed warm-up is logged, not fatal: its only purpose is the
		// memory it leaves behind, and the recorded runs judge the server.
		s.Logger.Info("warm-up done", "took", time.Since(started).Round(time.Millisecond), "failed", r.Failed || err != nil, "problem", r.Problem)
	}
	var results []Result
	for i, cfg := range s.Runs {
		cfg.Bin, cfg.Logger, cfg.Timeout = s.Bin, s.Logger, s.Timeout
		cfg.OutDir = filepath.Join(s.OutDir, "profiles")
		// A run identical to one already done (S2's N=1000 point is S1's
		// delta run when sizes match) is reused rather than repeated.
		if j := slices.IndexFunc(results, func(r Result) bool { return sameRun(r.Config, cfg) }); j >= 0 {
			r := results[j]
			r.Config.Scenario = cfg.Scenario
			r.Wall = 0 // it took no time of its own
			results = append(results, r)
			continue
		}
		// The id does not name a rate (file names would change), so the
		// line does: ReadLog tells S4's steps apart by it.
		attrs := []any{"n", fmt.Sprintf("%d/%d", i+1, len(s.Runs)), "id", cfg.ID()}
		if cfg.Rate > 0 {
			attrs = append(attrs, "rate", cfg.Rate)
		}
		s.Logger.Info("run", attrs...)
		started := time.Now()
		r, err := Run(ctx, cfg)
		r.Wall = time.Since(started)
		if err != nil {
			r.Fail("rig: %v", err)
			if ctx.Err() != nil {
				return results, err
			}
		}
		s.Logger.Info("done", "id", cfg.ID(), "took", time.Since(started).Round(time.Millisecond),
			"conv_p99", r.ConvP99, "cpu/client·change", r.CPUPerClientChange, "bytes/client·change", int(r.BytesPerClientChange), "failed", r.Failed, "problem", r.Problem)
		results = append(results, r)
		if err := s.write(results); err != nil {
			return results, err
		}
	}
	return results, nil
}

// sameRun reports whether a and b measure the same thing, whichever
// scenario they were planned for.
func sameRun(a, b Config) bool {
	a, b = a.measured(), b.measured()
	a.Scenario, b.Scenario = "", ""
	return a == b
}

func (s Suite) write(results []Result) error {
	md := Markdown(results, s.Machine)
	if err := os.WriteFile(filepath.Join(s.OutDir, "results.md"), []byte(md), 0o644); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	var csv strings.Builder
	if err := CSV(&csv, results); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.OutDir, "results.csv"), []byte(csv.String()), 0o644); err != nil {
		return fmt.Errorf("writing csv: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.OutDir, "chart.svg"), []byte(Chart(results)), 0o644); err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	return nil
}

// Repeat returns the runs n times, numbered by Config.Rep, in rounds: the
// whole plan, then the whole plan again. Implementations compared in one
// invocation alternate, so a drift of the machine over the invocation (the
// fleet's memory settling, another process) reaches each of them alike
// instead of the one that happens to run last.
func Repeat(runs []Config, n int) []Config {
	out := make([]Config, 0, len(runs)*max(n, 1))
	for rep := range max(n, 1) {
		for _, r := range runs {
			r.Rep = rep
			out = append(out, r)
		}
	}
	return out
}
