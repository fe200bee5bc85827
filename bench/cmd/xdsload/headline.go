package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/xdsbridge/xdsbridge/bench/fanout"
)

// headline prints the headline table of docs/benchmarks.md from raw
// results, and writes its chart. A file whose name ends in .csv is a
// results CSV; any other is a suite's log (xdsload bench's standard
// error). A row is taken from the first file that ran xdsbridge at its
// configuration, and all of it from that file.
func headline(args []string) error {
	fs := flag.NewFlagSet("headline", flag.ContinueOnError)
	svg := fs.String("svg", "", "also write the chart to this file")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		return errUsage
	}
	var sources []fanout.Source
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("reading results: %w", err)
		}
		read := fanout.ReadLog
		if strings.HasSuffix(name, ".csv") {
			read = fanout.ReadCSV
		}
		rs, err := read(f)
		if err = errors.Join(err, f.Close()); err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		sources = append(sources, fanout.Source{Name: name, Results: rs})
	}
	if err := fanout.Headline(os.Stdout, sources, fanout.HeadlineRows); err != nil {
		return err
	}
	if *svg == "" {
		return nil
	}
	if err := os.WriteFile(*svg, []byte(fanout.HeadlineChart(sources, fanout.HeadlineRows)), 0o644); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	return nil
}
