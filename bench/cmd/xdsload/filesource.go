package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/file"
)

// fileSource measures the file source's own cost end to end: the bridge
// binary serving a services file of each size, edited one line at a time.
func fileSource(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("file-source", flag.ContinueOnError)
	out := fs.String("out", "out/bench/file", "output directory (results.csv, results.md, the bridge's logs)")
	bridge := fs.String("bridge", "out/bench/bridge", "bridge binary (go build -o out/bench/bridge ./cmd/bridge)")
	sizes := fs.String("n", "1000,10000,100000", "services in the file, one run per size")
	formats := fs.String("formats", "yaml,json", "file formats, one run per format and size")
	endpoints := fs.Int("e", 10, "endpoints per service")
	edits := fs.Int("edits", 5, "sequential one-line edits per run")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound of the first publish and of each edit (a loaded machine needs minutes for the first at 100,000)")
	profile := fs.String("profile", "", "first or edits: save a CPU profile of the bridge from its start or from the first edit")
	profileFor := fs.Duration("profile-for", 10*time.Second, "length of the profile")
	table := fs.Bool("table", false, "print one table of the result CSVs named as LABEL=FILE.csv arguments (rows side by side by format and size) and run nothing")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	if *table {
		return fileSourceTable(fs.Args())
	}
	var results []file.Result
	for format := range strings.SplitSeq(*formats, ",") {
		if format != "yaml" && format != "json" {
			return fmt.Errorf("unknown format %q (yaml or json)", format)
		}
		for s := range strings.SplitSeq(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("parsing -n: %w", err)
			}
			log.Info("file source run", "format", format, "services", n, "endpoints", *endpoints)
			r, err := file.Run(ctx, file.Config{BridgeBin: *bridge, Format: format, Services: n,
				Endpoints: *endpoints, Edits: *edits, Timeout: *timeout, OutDir: abs, Profile: *profile, ProfileFor: *profileFor, Logger: log})
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	md := file.Markdown(results)
	fmt.Println(md)
	var csv strings.Builder
	if err := file.CSV(&csv, results); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(abs, "results.csv"), []byte(csv.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(abs, "results.md"), []byte(md+"\n"+machine()+"\n"), 0o644); err != nil {
		return err
	}
	for _, r := range results {
		if r.Failed {
			return fmt.Errorf("file source %s N=%d FAILED: %s", r.Config.Format, r.Config.Services, r.Problem)
		}
	}
	return nil
}

// fileSourceTable prints the rows of LABEL=FILE.csv arguments in one table,
// the rows of one format and size together, in the order of the files.
func fileSourceTable(args []string) error {
	var rows []file.Result
	var labels []string
	for _, a := range args {
		label, name, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%q: want LABEL=FILE.csv", a)
		}
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		rs, err := file.ReadCSV(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		for _, r := range rs {
			rows, labels = append(rows, r), append(labels, label)
		}
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ra, rb := rows[idx[a]].Config, rows[idx[b]].Config
		if ra.Format != rb.Format {
			return ra.Format > rb.Format // yaml first
		}
		return ra.Services < rb.Services
	})
	var sorted []file.Result
	var sortedLabels []string
	for _, i := range idx {
		sorted, sortedLabels = append(sorted, rows[i]), append(sortedLabels, labels[i])
	}
	fmt.Print(file.Markdown(sorted, sortedLabels...))
	return nil
}
