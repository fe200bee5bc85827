package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdsbridge/xdsbridge/bridge"
)

// dumpCmd is `bridge dump`: a dry run that prints what a client would
// receive from this configuration, for review and for diffing against a
// fleet's current static configuration.
func dumpCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dump --config FILE [--node-id N] [--grpc] [--type cds|eds|lds|rds] [--format yaml|json]",
		Short: "Read every source once and print the resources a client would receive",
		Long: `Dump runs every source of the configuration once (until each has read its
registry), applies the transforms and the cluster shaping rules like a
running bridge, prints the resources exactly as an Envoy (or, with --grpc, a
proxyless gRPC client) would receive them, and exits. Logs go to stderr.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			format, _ := f.GetString("format")
			if format != "yaml" && format != "json" {
				return usageError{fmt.Errorf("--format: unknown format %q (want yaml or json)", format)}
			}
			typ, _ := f.GetString("type")
			var types []string
			if typ != "" {
				url, ok := bridge.TypeURLs[typ]
				if !ok {
					return usageError{fmt.Errorf("--type: unknown type %q (want cds, eds, lds or rds)", typ)}
				}
				types = []string{url}
			}
			timeout, _ := f.GetDuration("timeout")
			if timeout <= 0 {
				return usageError{errors.New("--timeout: must be a positive duration")}
			}
			node, _ := f.GetString("node-id")
			grpc, _ := f.GetBool("grpc")
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if grpc && !cfg.XDS.GRPC.Enabled && (typ == "lds" || typ == "rds") {
				fmt.Fprintln(stderr, "bridge: note: xds.grpc.enabled is false, so there are no gRPC listeners or routes")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			rs, err := bridge.Snapshot(ctx, cfg, cfg.Log.NewLogger(stderr))
			if err != nil {
				return fmt.Errorf("reading the sources: %w", err)
			}
			out, err := bridge.Dump(rs, node, grpc, types, format == "yaml")
			if err != nil {
				return err
			}
			_, err = stdout.Write(out)
			return err
		},
	}
	configFlags(cmd)
	f := cmd.Flags()
	f.String("node-id", "", "the node id to show in the output")
	f.Bool("grpc", false, "show what a proxyless gRPC client receives (default: an Envoy)")
	types := slices.Sorted(func(yield func(string) bool) {
		for k := range bridge.TypeURLs {
			if !yield(k) {
				return
			}
		}
	})
	f.String("type", "", "only this type: "+strings.Join(types, ", "))
	f.String("format", "yaml", "output format: yaml or json")
	f.Duration("timeout", 30*time.Second, "how long to wait for every source to read its registry once")
	return cmd
}
