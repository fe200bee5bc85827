package fanout

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// column is one column of the results CSV: how a run's figure is written
// and read back. One table serves both, so that what ReadCSV reads is
// what CSV wrote.
type column struct {
	name string
	get  func(*Result) string
	set  func(*Result, string) error
}

// whole is a column of an integer figure (counts, bytes, durations in ns).
func whole[T ~int | ~int64](name string, field func(*Result) *T) column {
	return column{name,
		func(r *Result) string { return strconv.FormatInt(int64(*field(r)), 10) },
		func(r *Result, s string) error {
			v, err := strconv.ParseInt(s, 10, 64)
			*field(r) = T(v)
			return err
		}}
}

// real is a column of a fractional figure, written with one decimal.
func fraction(name string, field func(*Result) *float64) column {
	return column{name,
		func(r *Result) string { return strconv.FormatFloat(*field(r), 'f', 1, 64) },
		func(r *Result, s string) error {
			v, err := strconv.ParseFloat(s, 64)
			*field(r) = v
			return err
		}}
}

func text(name string, field func(*Result) *string) column {
	return column{name,
		func(r *Result) string { return *field(r) },
		func(r *Result, s string) error { *field(r) = s; return nil }}
}

var csvColumns = []column{
	text("scenario", func(r *Result) *string { return &r.Scenario }),
	whole("rep", func(r *Result) *int { return &r.Rep }),
	text("impl", func(r *Result) *string { return &r.Impl }),
	{"mode", func(r *Result) string { return r.Mode() }, func(r *Result, s string) error {
		r.Delta = s == "delta"
		if s != "delta" && s != "sotw" {
			return fmt.Errorf("mode %q is neither delta nor sotw", s)
		}
		return nil
	}},
	whole("clients", func(r *Result) *int { return &r.Clients }),
	whole("services", func(r *Result) *int { return &r.Services }),
	whole("endpoints", func(r *Result) *int { return &r.Endpoints }),
	whole("changes", func(r *Result) *int { return &r.ChangesDone }),
	fraction("rate", func(r *Result) *float64 { return &r.Rate }),
	whole("cold_start_ns", func(r *Result) *time.Duration { return &r.ColdStart }),
	whole("cold_cpu_ns", func(r *Result) *time.Duration { return &r.ColdCPU }),
	whole("conv_p50_ns", func(r *Result) *time.Duration { return &r.ConvP50 }),
	whole("conv_p99_ns", func(r *Result) *time.Duration { return &r.ConvP99 }),
	whole("conv_max_ns", func(r *Result) *time.Duration { return &r.ConvMax }),
	whole("client_p50_ns", func(r *Result) *time.Duration { return &r.ClientP50 }),
	whole("client_p99_ns", func(r *Result) *time.Duration { return &r.ClientP99 }),
	whole("cpu_per_change_ns", func(r *Result) *time.Duration { return &r.CPUPerChange }),
	whole("cpu_per_client_change_ns", func(r *Result) *time.Duration { return &r.CPUPerClientChange }),
	fraction("bytes_per_client_change", func(r *Result) *float64 { return &r.BytesPerClientChange }),
	fraction("resources_per_client_change", func(r *Result) *float64 { return &r.ResPerClientChange }),
	fraction("heap_per_client", func(r *Result) *float64 { return &r.HeapPerClient }),
	fraction("rss_per_client", func(r *Result) *float64 { return &r.RSSPerClient }),
	whole("server_rss", func(r *Result) *int64 { return &r.ServerRSS }),
	whole("server_rss_busy", func(r *Result) *int64 { return &r.ServerRSSBusy }),
	whole("server_peak_rss", func(r *Result) *int64 { return &r.PeakRSS }),
	whole("reconnect_ns", func(r *Result) *time.Duration { return &r.ReconnectTime }),
	whole("reconnect_cpu_ns", func(r *Result) *time.Duration { return &r.ReconnectCPU }),
	fraction("reconnect_bytes_per_client", func(r *Result) *float64 { return &r.ReconnectBytesClient }),
	whole("loadgen_cpu_per_change_ns", func(r *Result) *time.Duration { return &r.LoadgenCPUPerChange }),
	fraction("achieved_rate", func(r *Result) *float64 { return &r.AchievedRate }),
	whole("holdoff_ns", func(r *Result) *time.Duration { return &r.Holdoff }),
	whole("flushes", func(r *Result) *int { return &r.Flushes }),
	whole("conv_p99_first_ns", func(r *Result) *time.Duration { return &r.ConvP99First }),
	whole("conv_p99_last_ns", func(r *Result) *time.Duration { return &r.ConvP99Last }),
	whole("driver_lag_max_ns", func(r *Result) *time.Duration { return &r.DriverLagMax }),
	{"failed", func(r *Result) string { return strconv.FormatBool(r.Failed) }, func(r *Result, s string) error {
		var err error
		r.Failed, err = strconv.ParseBool(s)
		return err
	}},
	text("problem", func(r *Result) *string { return &r.Problem }),
	whole("wall_ns", func(r *Result) *time.Duration { return &r.Wall }),
	whole("loadgen_peak_rss", func(r *Result) *int64 { return &r.LoadgenPeakRSS }),
}

// CSV writes one row per run with every figure in base units (ns, bytes).
func CSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	row := make([]string, len(csvColumns))
	for i, c := range csvColumns {
		row[i] = c.name
	}
	if err := cw.Write(row); err != nil {
		return err
	}
	for _, r := range results {
		for i, c := range csvColumns {
			row[i] = c.get(&r)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads the runs CSV wrote. A column the file lacks (it was
// written before the column existed) leaves its figure zero; the changes
// column becomes ChangesDone.
func ReadCSV(r io.Reader) ([]Result, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("reading results: empty CSV")
	}
	at := map[string]int{}
	for i, h := range rows[0] {
		at[h] = i
	}
	out := make([]Result, 0, len(rows)-1)
	for n, row := range rows[1:] {
		var res Result
		for _, c := range csvColumns {
			i, ok := at[c.name]
			if !ok || i >= len(row) || row[i] == "" {
				continue
			}
			if err := c.set(&res, row[i]); err != nil {
				return nil, fmt.Errorf("reading results row %d, column %s: %w", n+2, c.name, err)
			}
		}
		out = append(out, res)
	}
	return out, nil
}
