package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xdsbridge/xdsbridge/bench/fleet"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// Config is the file source's own cost, end to end: the bridge
// binary serves a services file of N services to one delta client, and the
// file is edited one line at a time (the weight of one endpoint), each
// edit written as a new file renamed over the old one, as a tool would.
// The bridge's CPU (utime+stime from /proc/<pid>/stat) is read before an
// edit is written and again once the client holds the edited assignment;
// its peak RSS is VmHWM from /proc/<pid>/status. The client shares the
// machine but not the process, so its work is not counted.
type Config struct {
	BridgeBin  string
	Format     string // yaml or json
	Services   int
	Endpoints  int // per service
	Edits      int
	Timeout    time.Duration // bound of the first publish and of each edit
	OutDir     string        // the bridge's log and, with Profile, its CPU profile
	Profile    string        // "first" or "edits": write a CPU profile of that phase (the admin API's pprof)
	ProfileFor time.Duration // the profile's length
	Logger     *slog.Logger
}

// Result is one run of Config.
type Result struct {
	Config Config
	Bytes  int // size of the services file

	FirstPublish time.Duration // process start until the client holds every assignment
	FirstCPU     time.Duration // the bridge's CPU until then
	FirstPeakRSS int64         // VmHWM once the first state is served

	EditsDone             int
	CPUPerEdit            time.Duration // the bridge's CPU over all edits / edits
	EditCPUMin            time.Duration // the least CPU of one edit's window (write to publication)
	EditCPUMax            time.Duration
	EditLatP50, EditLatMx time.Duration // write until the client holds the edit (includes the source's 100 ms debounce and the manager's holdoff)
	PeakRSS               int64         // VmHWM at the end
	RSS                   int64         // VmRSS at the end

	Load1 [2]float64 // the 1-minute load average at the start and at the end

	Failed  bool
	Problem string
}

func (r *Result) fail(format string, args ...any) {
	r.Failed = true
	if r.Problem != "" {
		r.Problem += "; "
	}
	r.Problem += fmt.Sprintf(format, args...)
}

// Run runs one size and format. An error means the rig failed;
// a bridge that did not publish in time returns a Result with Failed set.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Config: cfg}
	res.Load1[0] = loadAvg()
	spec := workload.Spec{Services: cfg.Services, Endpoints: cfg.Endpoints}
	if err := spec.Validate(); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "xdsload-file-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	doc := newServicesDoc(spec, cfg.Format == "json")
	name := filepath.Join(dir, "services."+cfg.Format)
	if err := doc.write(name); err != nil {
		return res, err
	}
	res.Bytes = doc.size()

	ports, err := freeport.Take(2)
	if err != nil {
		return res, err
	}
	xdsAddr, adminAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	// The poll is an hour so that a poll's re-read (the fallback for a
	// missed watch event) does not land in an edit's window; the watch
	// sees every rename. max_bytes and the names a client may subscribe
	// to are lifted for the largest files, and the source is required so
	// that nothing is served before the file is read, however long that
	// takes.
	conf := filepath.Join(dir, "bridge.yaml")
	yaml := fmt.Sprintf("xds: {listen: %q, limits: {names_per_request: %d, names_per_subscription: %[2]d}}\n"+
		"admin: {listen: %q, pprof: %t}\nlog: {level: warn}\nsources:\n"+
		"  - {name: file, type: file, path: %q, poll_interval: 1h, max_bytes: %d, startup: {required: true}}\n",
		xdsAddr, 2*cfg.Services, adminAddr, cfg.Profile != "", name, 4<<30)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return res, err
	}
	logName := fmt.Sprintf("file.%s.%d.bridge.log", cfg.Format, cfg.Services)
	start := time.Now()
	bridge, err := proc.Start(filepath.Join(cfg.OutDir, logName), cfg.BridgeBin, "run", "--config", conf)
	if err != nil {
		return res, err
	}
	defer proc.Stop(bridge)
	pid := bridge.Process.Pid
	if err := proc.Poll(ctx, 30*time.Second, bridgeUp(adminAddr)); err != nil {
		return res, fmt.Errorf("waiting for the bridge's admin API: %w", err)
	}
	profile := make(chan error, 1)
	profileName := filepath.Join(cfg.OutDir, strings.TrimSuffix(logName, ".bridge.log")+"."+cfg.Profile+".pprof")
	if cfg.Profile == "first" {
		go func() { profile <- fetchProfile(ctx, adminAddr, cfg.ProfileFor, profileName) }()
	}
	f, err := fleet.StartLoad(ctx, fleet.LoadOptions{Addr: xdsAddr, Spec: spec, Clients: 1, Delta: true, Prefix: "file", Full: true})
	if err != nil {
		return res, err
	}
	defer f.Close()
	served, err := f.WaitServed(ctx, cfg.Timeout)
	if err != nil {
		res.fail("first publish: %v", err)
		return res, nil
	}
	res.FirstPublish = served.Sub(start)
	res.FirstCPU = proc.CPU(pid)
	res.FirstPeakRSS, _ = proc.Mem(pid)

	if cfg.Profile == "edits" {
		go func() { profile <- fetchProfile(ctx, adminAddr, cfg.ProfileFor, profileName) }()
	}
	cpu0 := proc.CPU(pid)
	cpuDone := cpu0 // after the last edit published
	var lats []time.Duration
	res.EditCPUMin = time.Duration(1<<63 - 1)
	for k := 1; k <= cfg.Edits; k++ {
		i := spec.Target(k)
		t := f.Track(k, workload.Name(i), hasWeight(workload.Name(i), spec.Service(i, 0).Endpoints[0].Address, uint32(2+k)))
		before := proc.CPU(pid)
		doc.edit(i, spec.Service(i, k))
		if err := doc.write(name); err != nil {
			return res, err
		}
		t.Wait(ctx, cfg.Timeout)
		after := proc.CPU(pid)
		f.Untrack(t)
		lat, ok := t.Latencies()
		if !ok {
			res.fail("edit %d was not published within %s", k, cfg.Timeout)
			break
		}
		lats = append(lats, lat...)
		res.EditCPUMin, res.EditCPUMax = min(res.EditCPUMin, after-before), max(res.EditCPUMax, after-before)
		res.EditsDone++
		cpuDone = after
		cfg.Logger.Info("edit published", "format", cfg.Format, "services", cfg.Services, "edit", k,
			"cpu", after-before, "latency", slices.Max(lat))
	}
	if res.EditsDone > 0 {
		res.CPUPerEdit = (cpuDone - cpu0) / time.Duration(res.EditsDone)
		res.EditLatP50, res.EditLatMx = report.Pct(lats, 50), report.Pct(lats, 100)
	} else {
		res.EditCPUMin = 0
	}
	res.PeakRSS, res.RSS = proc.Mem(pid)
	res.Load1[1] = loadAvg()
	if cfg.Profile != "" {
		if err := <-profile; err != nil {
			cfg.Logger.Warn("profiling the bridge", "err", err)
		}
	}
	return res, nil
}

// bridgeUp reports whether the bridge's admin API answers at all (it
// listens before the sources' first sync, /readyz would not).
func bridgeUp(adminAddr string) func() bool {
	return proc.AdminAnswers(adminAddr, "/healthz", func(int) bool { return true })
}

// fetchProfile saves a CPU profile of the bridge of the next d.
func fetchProfile(ctx context.Context, adminAddr string, d time.Duration, path string) error {
	u := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", adminAddr, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, resp.Body)
	return errors.Join(err, out.Close())
}

// hasWeight matches a client whose assignment `name` gives the endpoint at
// address the weight w.
func hasWeight(name, address string, w uint32) func(*envoysim.Client) bool {
	return func(c *envoysim.Client) bool {
		cla, _ := c.Resource(envoysim.EndpointType, name).(*endpointv3.ClusterLoadAssignment)
		for _, l := range cla.GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				if e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() == address {
					return e.GetLoadBalancingWeight().GetValue() == w
				}
			}
		}
		return false
	}
}

// loadAvg is the 1-minute load average (0 where unavailable).
func loadAvg() float64 { return proc.LoadOf(proc.LoadLine()) }

// servicesDoc is the services file as one chunk of text per service, so
// that an edit rewrites one service's text (one line: one endpoint's
// weight) and the file is written from the chunks.
type servicesDoc struct {
	json       bool
	head, tail []byte
	chunks     [][]byte
}

func newServicesDoc(spec workload.Spec, isJSON bool) *servicesDoc {
	d := &servicesDoc{json: isJSON, chunks: make([][]byte, spec.Services)}
	if isJSON {
		d.head, d.tail = []byte("{\"services\": [\n"), []byte("]}\n")
	} else {
		d.head = []byte("services:\n")
	}
	for i := range d.chunks {
		d.edit(i, spec.Service(i, 0))
	}
	return d
}

// edit replaces service i's text.
func (d *servicesDoc) edit(i int, s sources.Service) {
	var b bytes.Buffer
	if d.json {
		// One service a line, one endpoint a line: the shape of a
		// generated file that a line-based diff reads well.
		fmt.Fprintf(&b, "  {\"name\": %q, \"endpoints\": [\n", s.Name)
		for j, e := range s.Endpoints {
			loc, _ := json.Marshal(map[string]string{"region": e.Locality.Region, "zone": e.Locality.Zone})
			sep := ","
			if j == len(s.Endpoints)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "    {\"address\": %q, \"port\": %d, \"weight\": %d, \"locality\": %s}%s\n", e.Address, e.Port, e.Weight, loc, sep)
		}
		b.WriteString("  ]}")
		if i < len(d.chunks)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	} else {
		fmt.Fprintf(&b, "  - name: %s\n    endpoints:\n", s.Name)
		for _, e := range s.Endpoints {
			fmt.Fprintf(&b, "      - {address: %s, port: %d, weight: %d, locality: {region: %s, zone: %s}}\n",
				e.Address, e.Port, e.Weight, e.Locality.Region, e.Locality.Zone)
		}
	}
	d.chunks[i] = b.Bytes()
}

func (d *servicesDoc) size() int {
	n := len(d.head) + len(d.tail)
	for _, c := range d.chunks {
		n += len(c)
	}
	return n
}

// write writes the file as a tool should: a new file renamed over the old.
func (d *servicesDoc) write(path string) error {
	tmp := path + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	_, err = w.Write(d.head)
	for _, c := range d.chunks {
		if err == nil {
			_, err = w.Write(c)
		}
	}
	if err == nil {
		_, err = w.Write(d.tail)
	}
	if err = errors.Join(err, w.Flush(), out.Close()); err != nil {
		return fmt.Errorf("writing the services file: %w", err)
	}
	return os.Rename(tmp, path)
}

// CSV writes one row per run, every figure in base units (ns,
// bytes).
func CSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"format", "services", "endpoints", "file_bytes", "first_publish_ns", "first_cpu_ns",
		"first_peak_rss", "edits", "cpu_per_edit_ns", "edit_cpu_min_ns", "edit_cpu_max_ns", "edit_latency_p50_ns",
		"edit_latency_max_ns", "peak_rss", "rss", "load1_start", "load1_end", "failed", "problem"}); err != nil {
		return err
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, r := range results {
		c := r.Config
		if err := cw.Write([]string{c.Format, i(int64(c.Services)), i(int64(c.Endpoints)), i(int64(r.Bytes)),
			i(int64(r.FirstPublish)), i(int64(r.FirstCPU)), i(r.FirstPeakRSS), i(int64(r.EditsDone)),
			i(int64(r.CPUPerEdit)), i(int64(r.EditCPUMin)), i(int64(r.EditCPUMax)), i(int64(r.EditLatP50)),
			i(int64(r.EditLatMx)), i(r.PeakRSS), i(r.RSS), f(r.Load1[0]), f(r.Load1[1]),
			strconv.FormatBool(r.Failed), r.Problem}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Markdown is the table of the runs, for the terminal and the
// results file; a non-empty label names the build in a first column.
func Markdown(results []Result, label ...string) string {
	var b strings.Builder
	if len(label) > 0 {
		b.WriteString("| build ")
	}
	b.WriteString("| format | services × endpoints | file | first publish | CPU to first publish | CPU per edit (min–max) | edit latency p50 | peak RSS at first publish | peak RSS | load avg (1 min) |\n")
	if len(label) > 0 {
		b.WriteString("|---")
	}
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range results {
		c := r.Config
		state := ""
		if r.Failed {
			state = " FAILED: " + r.Problem
		}
		if i < len(label) {
			fmt.Fprintf(&b, "| %s ", label[i])
		}
		fmt.Fprintf(&b, "| %s | %d × %d | %s | %s | %s | %s (%s–%s) | %s | %s | %s | %.1f–%.1f |%s\n", c.Format, c.Services, c.Endpoints,
			report.Size(float64(r.Bytes)), report.MS(r.FirstPublish), report.MS(r.FirstCPU), report.CPU(r.CPUPerEdit), report.CPU(r.EditCPUMin), report.CPU(r.EditCPUMax),
			report.MS(r.EditLatP50), report.Size(float64(r.FirstPeakRSS)), report.Size(float64(r.PeakRSS)), r.Load1[0], r.Load1[1], state)
	}
	return b.String()
}

// ReadCSV reads the rows CSV wrote.
func ReadCSV(r io.Reader) ([]Result, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("empty CSV")
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var out []Result
	for _, row := range rows[1:] {
		i := func(k string) int64 { v, _ := strconv.ParseInt(row[col[k]], 10, 64); return v }
		d := func(k string) time.Duration { return time.Duration(i(k)) }
		f := func(k string) float64 { v, _ := strconv.ParseFloat(row[col[k]], 64); return v }
		out = append(out, Result{
			Config: Config{Format: row[col["format"]], Services: int(i("services")), Endpoints: int(i("endpoints"))},
			Bytes:  int(i("file_bytes")), FirstPublish: d("first_publish_ns"), FirstCPU: d("first_cpu_ns"),
			FirstPeakRSS: i("first_peak_rss"), EditsDone: int(i("edits")), CPUPerEdit: d("cpu_per_edit_ns"),
			EditCPUMin: d("edit_cpu_min_ns"), EditCPUMax: d("edit_cpu_max_ns"), EditLatP50: d("edit_latency_p50_ns"),
			EditLatMx: d("edit_latency_max_ns"), PeakRSS: i("peak_rss"), RSS: i("rss"),
			Load1: [2]float64{f("load1_start"), f("load1_end")}, Failed: row[col["failed"]] == "true", Problem: row[col["problem"]],
		})
	}
	return out, nil
}
