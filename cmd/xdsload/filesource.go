package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/bench"
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
	timeout := fs.Duration("timeout", 10*time.Minute, "bound of the first publish and of each edit")
	profile := fs.String("profile", "", "first or edits: save a CPU profile of the bridge from its start or from the first edit")
	profileFor := fs.Duration("profile-for", 10*time.Second, "length of the profile")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	var results []bench.FileSourceResult
	for _, format := range strings.Split(*formats, ",") {
		if format != "yaml" && format != "json" {
			return fmt.Errorf("unknown format %q (yaml or json)", format)
		}
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("parsing -n: %w", err)
			}
			log.Info("file source run", "format", format, "services", n, "endpoints", *endpoints)
			r, err := bench.RunFileSource(ctx, bench.FileSourceConfig{BridgeBin: *bridge, Format: format, Services: n,
				Endpoints: *endpoints, Edits: *edits, Timeout: *timeout, OutDir: abs, Profile: *profile, ProfileFor: *profileFor, Logger: log})
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	md := bench.FileSourceMarkdown(results)
	fmt.Println(md)
	var csv strings.Builder
	if err := bench.FileSourceCSV(&csv, results); err != nil {
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
