package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/config"
)

// summary prints what a valid configuration sets up, one section a line.
func summary(w io.Writer, cfg *config.Config) {
	fmt.Fprintln(w, "config OK")
	fmt.Fprintf(w, "  xds.listen    %s (grpc chain: %t)\n", cfg.XDS.Listen, cfg.XDS.GRPC.Enabled)
	fmt.Fprintf(w, "  admin.listen  %s\n", cfg.Admin.Listen)
	fmt.Fprintf(w, "  log           %s, %s\n", cfg.Log.Level, cfg.Log.Format)
	fmt.Fprintf(w, "  holdoff       %s (max %s)\n", cfg.Holdoff.Min, cfg.Holdoff.Max)
	fmt.Fprintf(w, "  sources       %d\n", len(cfg.Entries))
	for _, e := range cfg.Entries {
		fmt.Fprintf(w, "    - %s (%s)\n", e.Name, e.Type)
	}
	fmt.Fprintf(w, "  transforms    %d\n", cfg.Chain.Len())
	fmt.Fprintf(w, "  clusters      %d shaping rules\n", len(cfg.Shaping.Rules))
	fmt.Fprintf(w, "  merge         default %s, %d service rules\n", orDefault(cfg.Merge.Default, "first"), len(cfg.Merge.Services))
	for _, r := range cfg.Merge.Services {
		var weights []string
		for _, wt := range r.Weights {
			if wt.Weight != nil {
				weights = append(weights, fmt.Sprintf("%s=%d", wt.Source, *wt.Weight))
			}
		}
		line := fmt.Sprintf("    - %s: %s", r.Service, orDefault(r.Mode, "first"))
		if len(weights) > 0 {
			line += " (" + strings.Join(weights, ", ") + ")"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "  outputs       %d\n", len(cfg.Outputs))
	for _, o := range cfg.Outputs {
		fmt.Fprintf(w, "    - %s %s (%s)\n", o.Type, o.Dir, strings.Join(o.Types, ", "))
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// servicesFileHint is added to the error of a configuration that is not
// one: a file with services and no sources is what a file source reads, a
// mix-up easy to make since both are YAML next to each other.
func servicesFileHint(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var top map[string]any
	if yaml.Unmarshal(data, &top) != nil {
		return ""
	}
	_, services := top["services"]
	_, srcs := top["sources"]
	if !services || srcs {
		return ""
	}
	return "; this looks like a services file for a `file` source; the bridge configuration is " +
		"the YAML file that lists it under sources (sources: [{name: static, type: file, path: " + filepath.Base(path) + "}]), " +
		"such as examples/quickstart/bridge.yaml"
}
