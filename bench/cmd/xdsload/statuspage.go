package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/statuspage"
)

// statusPage measures the admin status page of one or more bridge binaries
// at one size: its bytes, and what loading it costs headless Chromium.
func statusPage(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("status-page", flag.ContinueOnError)
	out := fs.String("out", "out/bench/status-page", "output directory (results.csv, results.md, the bridges' logs)")
	bridges := fs.String("bridge", "out/bench/bridge", "bridge binaries to compare, LABEL=PATH or PATH, comma-separated")
	var cfg statuspage.Config
	fs.StringVar(&cfg.Chromium, "chromium", "chromium", "Chromium binary")
	fs.IntVar(&cfg.Services, "n", 10000, "services")
	fs.IntVar(&cfg.Clients, "c", 1000, "xDS clients (one in 50 NACKs every assignment)")
	fs.IntVar(&cfg.Runs, "runs", 5, "measured loads per path (after one that is not counted)")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "bound of each wait")
	paths := fs.String("paths", "/", "pages to measure, comma-separated (such as /,/?q=svc-0004)")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	if cfg.Chromium, err = exec.LookPath(cfg.Chromium); err != nil {
		return fmt.Errorf("finding chromium (apt-get install chromium): %w", err)
	}
	cfg.Paths, cfg.OutDir, cfg.Logger = strings.Split(*paths, ","), abs, log
	var results []statuspage.Result
	for b := range strings.SplitSeq(*bridges, ",") {
		label, bin, ok := strings.Cut(b, "=")
		if !ok {
			label, bin = filepath.Base(b), b
		}
		cfg.BridgeBin, cfg.Label = bin, label
		rs, err := statuspage.Run(ctx, cfg)
		results = append(results, rs...)
		if err != nil {
			return fmt.Errorf("status page of %s: %w", label, err)
		}
	}
	md := statuspage.Markdown(results)
	fmt.Print(md)
	f, err := os.Create(filepath.Join(abs, "results.csv"))
	if err != nil {
		return err
	}
	err = errors.Join(statuspage.CSV(f, results), f.Close())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(abs, "results.md"), []byte(md+"\n"+machine()+"\n"), 0o644)
}
