package fanout

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// legacyS4Rates are the rates of S4's steps, in the order a suite ran them
// in each round, for logs whose run lines do not name the rate: the full
// preset's steps when those logs were written.
var legacyS4Rates = []float64{100, 300, 1000}

// runID parses Config.ID: scenario, implementation, mode, C, N and the
// repetition.
var runID = regexp.MustCompile(`^([^-]+)-(.+)-(delta|sotw)-c(\d+)-n(\d+)(?:-r(\d+))?$`)

// ReadLog reads the runs that a suite's log (what `xdsload bench` writes
// to its standard error) records, for a suite whose results.csv is lost.
// A log has fewer figures than the CSV: per run the cold start, the
// convergence p99, the server CPU and bytes per client·change, the
// process RSS right after the changes and once quiet, whether the run
// failed, and, for a run with a reconnect, the largest of the RSS samples
// taken during it (every 250 ms), which becomes PeakRSS. Every other
// figure is zero. The warm-up is not a run and is left out.
func ReadLog(r io.Reader) ([]Result, error) {
	var out []Result
	current := map[string]int{} // run id -> index in out of its latest run line
	s4Step := map[string]int{}  // run id -> S4 runs seen under it, for logs without rates
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := logfmt(sc.Text())
		id := f["run"]
		if id == "" {
			id = f["id"]
		}
		if f["msg"] == "run" {
			res, err := resultOfID(id)
			if err != nil {
				return nil, fmt.Errorf("reading log line %d: %w", line, err)
			}
			if v, ok := f["rate"]; ok {
				if res.Rate, err = strconv.ParseFloat(v, 64); err != nil {
					return nil, fmt.Errorf("reading log line %d: rate: %w", line, err)
				}
			} else if res.Scenario == "S4" {
				i := s4Step[id]
				s4Step[id]++
				if i >= len(legacyS4Rates) {
					return nil, fmt.Errorf("reading log line %d: run %s without a rate, more often than S4 has steps", line, id)
				}
				res.Rate = legacyS4Rates[i]
			}
			current[id] = len(out)
			out = append(out, res)
			continue
		}
		i, ok := current[id]
		if !ok {
			continue
		}
		if err := readFigure(&out[i], f); err != nil {
			return nil, fmt.Errorf("reading log line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading log: %w", err)
	}
	return out, nil
}

// resultOfID is an empty result of the configuration a run id names.
func resultOfID(id string) (Result, error) {
	m := runID.FindStringSubmatch(id)
	if m == nil {
		return Result{}, fmt.Errorf("run id %q is not scenario-impl-mode-cC-nN", id)
	}
	c, _ := strconv.Atoi(m[4])
	n, _ := strconv.Atoi(m[5])
	rep, _ := strconv.Atoi(m[6]) // empty for the first repetition
	return Result{Config: Config{Scenario: m[1], Impl: m[2], Delta: m[3] == "delta", Clients: c, Services: n, Rep: rep}}, nil
}

// readFigure takes what one log line of a run says into r.
func readFigure(r *Result, f map[string]string) error {
	var err error
	switch f["msg"] {
	case "cold start":
		r.ColdStart, err = time.ParseDuration(f["time"])
	case "server memory right after the changes":
		r.ServerRSSBusy, err = strconv.ParseInt(f["rss"], 10, 64)
	case "server memory once quiet":
		r.ServerRSS, err = strconv.ParseInt(f["rss"], 10, 64)
	case "memory high":
		var mb int64
		mb, err = strconv.ParseInt(f["rss_mb"], 10, 64)
		r.PeakRSS = max(r.PeakRSS, mb<<20)
	case "done":
		r.Failed = f["failed"] == "true"
		r.Problem = f["problem"]
		if r.Failed {
			break
		}
		var bytes float64
		r.ConvP99, err = time.ParseDuration(f["conv_p99"])
		if err == nil {
			r.CPUPerClientChange, err = time.ParseDuration(f["cpu/client·change"])
		}
		if err == nil {
			bytes, err = strconv.ParseFloat(f["bytes/client·change"], 64)
			r.BytesPerClientChange = bytes
		}
	}
	if err != nil {
		return fmt.Errorf("%s of run %s: %w", f["msg"], r.ID(), err)
	}
	return nil
}

// logfmt splits a line of log/slog's text handler into its keys and
// values; quoted values are unquoted.
func logfmt(line string) map[string]string {
	f := map[string]string{}
	for line != "" {
		line = strings.TrimLeft(line, " ")
		k, rest, ok := strings.Cut(line, "=")
		if !ok || strings.Contains(k, " ") {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		f[k] = v
		line = rest
	}
	return f
}
