package fanout

import (
	"bytes"
	"encoding/xml"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// suiteLog is lines of a suite's log as xdsload bench writes them: a
// warm-up, a run with a reconnect, two rounds of S4 runs whose run lines
// name no rate, a failed run, and a run line naming its rate.
const suiteLog = `time=2026-12-03T06:10:24.094Z level=INFO msg="warm-up, not recorded" id=warmup-xdsbridge-delta-c1000-n10000
time=2026-12-03T06:11:32.512Z level=INFO msg="cold start" run=warmup-xdsbridge-delta-c1000-n10000 time=1m5.748508826s heap/client=30441.472
time=2026-12-03T06:11:39.821Z level=INFO msg="warm-up done" took=1m15.726s failed=false problem=""
time=2026-12-03T06:40:56.345Z level=INFO msg=run n=39/153 id=S5-xdsbridge-delta-c1000-n1000
time=2026-12-03T06:41:00.950Z level=INFO msg="cold start" run=S5-xdsbridge-delta-c1000-n1000 time=2.39030752s heap/client=19701.76
time=2026-12-03T06:41:02.937Z level=INFO msg="server memory right after the changes" run=S5-xdsbridge-delta-c1000-n1000 rss=86978560 heap_inuse=66658304 heap_retained=66658304 stacks=23560192 goroutines=4008 memory_returns=1
time=2026-12-03T06:41:04.039Z level=INFO msg="server memory once quiet" run=S5-xdsbridge-delta-c1000-n1000 rss=70606848 heap_inuse=24289280 heap_retained=24289280 stacks=20054016 goroutines=4008 memory_returns=2
time=2026-12-03T06:41:07.455Z level=INFO msg="memory high" run=S5-xdsbridge-delta-c1000-n1000 rss_mb=93 heap_inuse_mb=52 heap_alloc_mb=50 heap_sys_mb=71 heap_released_mb=18 next_gc_mb=84 goroutines=3776
time=2026-12-03T06:41:07.859Z level=INFO msg="memory high" run=S5-xdsbridge-delta-c1000-n1000 rss_mb=170 heap_inuse_mb=110 heap_alloc_mb=107 heap_sys_mb=131 heap_released_mb=1 next_gc_mb=149 goroutines=4010
time=2026-12-03T06:41:08.778Z level=INFO msg=done id=S5-xdsbridge-delta-c1000-n1000 took=12.433s conv_p99=103.664855ms cpu/client·change=81.073µs bytes/client·change=560 failed=false problem=""
time=2026-12-03T06:23:16.884Z level=INFO msg=run n=30/153 id=S4-xdsbridge-delta-c1000-n1000
time=2026-12-03T06:24:26.730Z level=INFO msg=done id=S4-xdsbridge-delta-c1000-n1000 took=1m9.846s conv_p99=233.1ms cpu/client·change=6.19µs bytes/client·change=492 failed=false problem=""
time=2026-12-03T06:27:08.560Z level=INFO msg=run n=33/153 id=S4-xdsbridge-delta-c1000-n1000
time=2026-12-03T06:27:41.130Z level=INFO msg=done id=S4-xdsbridge-delta-c1000-n1000 took=32.57s conv_p99=554ms cpu/client·change=2.42µs bytes/client·change=487 failed=false problem=""
time=2026-12-03T06:32:46.485Z level=INFO msg=run n=36/153 id=S4-xdsbridge-delta-c1000-n1000
time=2026-12-03T06:35:20.077Z level=INFO msg=done id=S4-xdsbridge-delta-c1000-n1000 took=2m33.592s conv_p99=5.518921616s cpu/client·change=542ns bytes/client·change=210 failed=true problem="11409 of 20000 changes did not reach every client within 2m0s"
time=2026-12-03T07:03:27.592Z level=INFO msg=run n=81/153 id=S4-xdsbridge-delta-c1000-n1000-r1
time=2026-12-03T07:04:38.760Z level=INFO msg=done id=S4-xdsbridge-delta-c1000-n1000-r1 took=1m11s conv_p99=206ms cpu/client·change=6.1µs bytes/client·change=492 failed=false problem=""
time=2026-12-03T09:00:00.000Z level=INFO msg=run n=1/1 id=S4-snapshot-delta-c200-n1000 rate=300
`

func TestReadLog(t *testing.T) {
	rs, err := ReadLog(strings.NewReader(suiteLog))
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		id     string
		rate   float64
		failed bool
	}
	var got []run
	for _, r := range rs {
		got = append(got, run{r.ID(), r.Rate, r.Failed})
	}
	want := []run{
		{"S5-xdsbridge-delta-c1000-n1000", 0, false},
		{"S4-xdsbridge-delta-c1000-n1000", 100, false},
		{"S4-xdsbridge-delta-c1000-n1000", 300, false},
		{"S4-xdsbridge-delta-c1000-n1000", 1000, true},
		{"S4-xdsbridge-delta-c1000-n1000-r1", 100, false},
		{"S4-snapshot-delta-c200-n1000", 300, false},
	}
	if len(got) != len(want) {
		t.Fatalf("runs %v, want %v (the warm-up left out)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("run %d is %+v, want %+v", i, got[i], want[i])
		}
	}
	s5 := rs[0]
	if s5.ColdStart != 2390307520*time.Nanosecond || s5.ConvP99 != 103664855*time.Nanosecond ||
		s5.CPUPerClientChange != 81073*time.Nanosecond || s5.BytesPerClientChange != 560 ||
		s5.ServerRSSBusy != 86978560 || s5.ServerRSS != 70606848 || s5.PeakRSS != 170<<20 {
		t.Errorf("S5 run read as %+v", s5)
	}
	if rs[3].ConvP99 != 0 || !strings.Contains(rs[3].Problem, "11409 of 20000") {
		t.Errorf("a failed run keeps its problem and no figures: %+v", rs[3])
	}
}

// TestReadCSVWritesBack reads rows of a committed results CSV and writes
// them again: byte for byte the same, so every column is read into the
// field it was written from.
func TestReadCSVWritesBack(t *testing.T) {
	const in = `scenario,rep,impl,mode,clients,services,endpoints,changes,rate,cold_start_ns,cold_cpu_ns,conv_p50_ns,conv_p99_ns,conv_max_ns,client_p50_ns,client_p99_ns,cpu_per_change_ns,cpu_per_client_change_ns,bytes_per_client_change,resources_per_client_change,heap_per_client,rss_per_client,server_rss,server_rss_busy,server_peak_rss,reconnect_ns,reconnect_cpu_ns,reconnect_bytes_per_client,loadgen_cpu_per_change_ns,achieved_rate,holdoff_ns,flushes,conv_p99_first_ns,conv_p99_last_ns,driver_lag_max_ns,failed,problem,wall_ns,loadgen_peak_rss
S4,0,xdsbridge,delta,1000,1000,10,2000,100.0,2129904015,974643000,96609661,169015107,210817231,70002204,145712665,5382326,5382,492.6,1.0,19423.2,40366.1,79253504,79155200,134172672,0,0,0.0,7025003,100.0,100000000,200,158197990,173602136,81631070,false,,27981010886,0
S5,2,xdsbridge-unbudgeted,sotw,1000,10000,10,5,0.0,1,2,3,4,5,6,7,8,9,10.5,11.5,12.5,13.5,14,15,16,17,18,19.5,20,21.5,22,23,24,25,26,true,"a problem, quoted",27,28
`
	rs, err := ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := CSV(&out, rs); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("written back:\n%s\nread:\n%s", out.String(), in)
	}
	if r := rs[1]; r.Delta || r.Rep != 2 || r.ReconnectTime != 17 || r.DriverLagMax != 26 || !r.Failed || r.LoadgenPeakRSS != 28 {
		t.Errorf("second row read as %+v", r)
	}
}

// headlineRuns are three runs of each implementation at one point (one
// of LinearCache's failed) and xdsbridge alone at another.
func headlineRuns() []Result {
	at := Config{Scenario: "S1", Delta: true, Clients: 1000, Services: 1000}
	var rs []Result
	for rep, p99 := range []time.Duration{146, 114, 138} {
		for impl, f := range map[string]time.Duration{"xdsbridge": 1, "snapshot": 10, "linear": 8} {
			c := at
			c.Impl, c.Rep = impl, rep
			rs = append(rs, Result{Config: c, ConvP99: f * p99 * time.Millisecond, Failed: impl == "linear" && rep == 1})
		}
	}
	alone := Config{Scenario: "S7", Impl: "xdsbridge", Delta: true, Clients: 10000, Services: 1000}
	return append(rs, Result{Config: alone, ConvP99: 962 * time.Millisecond})
}

var (
	rowS1 = HeadlineRow{Figure: figConvP99, At: Point{"S1", true, 1000, 1000, 0}, Chart: true}
	rowS7 = HeadlineRow{Figure: figConvP99, At: Point{"S7", true, 10000, 1000, 0}}
)

func TestHeadline(t *testing.T) {
	var out strings.Builder
	err := Headline(&out, []Source{{"suite.log", headlineRuns()}}, []HeadlineRow{rowS1, rowS7,
		{Figure: figCold, At: Point{"S6", true, 1000, 10000, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| **a change at every client, p99** | | | | |\n| S1 delta, C=1,000, N=1,000 | 138 ms (114–146) | 1,380 ms | **1,136 ms; 1 of 3 runs failed** | 0.12× |\n| S7 delta, C=10,000, N=1,000 | 962 ms | not run | not run | – |\n",
		"Raw results of every row: `suite.log`.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("headline lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "S6") {
		t.Errorf("a row no source has is printed:\n%s", out.String())
	}
}

// TestHeadlineRef checks a row whose ratio is to another implementation
// than the stock caches: it names it, with its median.
func TestHeadlineRef(t *testing.T) {
	var rs []Result
	for rep, cold := range []time.Duration{18, 19, 25} {
		for impl, f := range map[string]time.Duration{"xdsbridge": 10, "floor": 8} {
			c := Config{Scenario: "S6", Impl: impl, Delta: true, Clients: 1000, Services: 10000, Rep: rep}
			rs = append(rs, Result{Config: c, ColdStart: f * cold * time.Second / 10})
		}
	}
	var out strings.Builder
	row := HeadlineRow{Figure: figCold, At: Point{"S6", true, 1000, 10000, 0}, Ref: "floor"}
	if err := Headline(&out, []Source{{"s6.csv", rs}}, []HeadlineRow{row}); err != nil {
		t.Fatal(err)
	}
	if want := "| S6 delta, C=1,000, N=10,000 | 19.0 s (18.0–25.0) | not run | not run | 1.25× the floor's 15.2 s |"; !strings.Contains(out.String(), want) {
		t.Errorf("headline lacks %q:\n%s", want, out.String())
	}
}

// TestHeadlineRowsDoNotMix checks that a row takes its baselines from the
// file its xdsbridge runs come from, not from another file that has them.
func TestHeadlineRowsDoNotMix(t *testing.T) {
	rs := headlineRuns()
	var bridge, stock []Result
	for _, r := range rs {
		if r.Impl == "xdsbridge" {
			bridge = append(bridge, r)
		} else {
			stock = append(stock, r)
		}
	}
	var out strings.Builder
	if err := Headline(&out, []Source{{"stock.csv", stock}, {"bridge.log", bridge}}, []HeadlineRow{rowS1}); err != nil {
		t.Fatal(err)
	}
	if want := "| 138 ms (114–146) | not run | not run | – |"; !strings.Contains(out.String(), want) {
		t.Errorf("headline lacks %q:\n%s", want, out.String())
	}
}

// TestHeadlineChartScale checks that the chart is an SVG document whose
// bars are as long as the medians, on one scale per panel.
func TestHeadlineChartScale(t *testing.T) {
	svg := HeadlineChart([]Source{{"suite.log", headlineRuns()}}, []HeadlineRow{rowS1, rowS7})
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("not XML: %v\n%s", err, svg)
	}
	width := map[string]float64{}
	for _, m := range regexp.MustCompile(`width="([\d.]+)" height="\d+" fill="[^"]+"><title>(\w+):`).FindAllStringSubmatch(svg, -1) {
		width[m[2]], _ = strconv.ParseFloat(m[1], 64)
	}
	if len(width) != 3 {
		t.Fatalf("bars %v, want one per implementation of the charted row only", width)
	}
	if r := width["SnapshotCache"] / width["xdsbridge"]; r < 9.9 || r > 10.1 {
		t.Errorf("SnapshotCache's bar is %.2f× xdsbridge's, want 10× (bars %v)", r, width)
	}
}
