package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/spf13/cobra"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/xds"
)

// dumpCmd is `bridge dump`: a dry run that prints what a client would
// receive from this configuration, for review and for diffing against a
// fleet's current static configuration.
func dumpCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dump FILE [--type cds,eds,lds,rds,sds] [--mcp] [--format yaml|json] [--grpc] [--node-id N] [--node-cluster C]",
		Short: "Read every source once and print the resources a client would receive",
		Long: `Dump runs every source of the configuration FILE (or --config FILE) once,
until each has read its registry, applies the transforms and the cluster
shaping rules like a running bridge, prints the resources exactly as the
node described by --node-id, --node-cluster and --grpc would receive them
on wildcard subscriptions (its scope applied, when the configuration has
scopes), and exits.

The output is Envoy's config dump (envoy.admin.v3.ConfigDump, the shape of
an Envoy's /config_dump) with proto field names: a bootstrap holding the
node, then dynamic_active_clusters, dynamic_listeners, dynamic_route_configs,
dynamic_active_secrets and dynamic_endpoint_configs, each resource with its
version_info (the version the bridge serves it with). Private keys are
redacted ("[redacted]"), as in Envoy's own dump; the secrets shown are those
the node's scope is granted. With --type only those types are printed,
without the bootstrap, so that

  bridge dump FILE --type cds --format json | jq '.configs[0].dynamic_active_clusters[].cluster'

lines up with an Envoy's /config_dump?resource=dynamic_active_clusters.
Envoys get the listeners, routes and secrets of the listeners, routes,
secrets and resources sections; the proxyless gRPC chain of every service
goes to gRPC clients only: see it with --grpc.

With --mcp (or --type serviceentry,workloadentry) it prints what
istiod would receive from the istio section instead (even while
istio.enabled is false, which it notes on stderr): per MCP collection, a
DiscoveryResponse of the collection's type URL whose resources are
istio.mcp.v1alpha1.Resource messages (metadata name "namespace/name" and
content version, body the ServiceEntry or WorkloadEntry).

Only resources go to stdout; warnings and errors go to stderr (more with
--log-level info). A source that fails its first read ends the dump with
its error.

Exit codes: 0 printed, 1 a source failed or did not report within
--timeout, 2 invalid configuration or command line.`,
		Args: maxOneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			format, _ := f.GetString("format")
			format = strings.ToLower(format)
			if format != "yaml" && format != "json" {
				return usageError{fmt.Errorf("--format: unknown format %q (want yaml or json)", format)}
			}
			names, _ := f.GetStringSlice("type")
			types, err := typeURLs(names, dumpTypes)
			if err != nil {
				return err
			}
			all, _ := f.GetBool("mcp")
			mcp, types, err := mcpTypes(types, all)
			if err != nil {
				return err
			}
			timeout, _ := f.GetDuration("timeout")
			if timeout <= 0 {
				return usageError{errors.New("--timeout: must be a positive duration")}
			}
			id, _ := f.GetString("node-id")
			cluster, _ := f.GetString("node-cluster")
			grpc, _ := f.GetBool("grpc")
			cfg, err := loadConfig(cmd, args)
			if err != nil {
				return err
			}
			if mcp && !cfg.Istio.Enabled {
				fmt.Fprintln(stderr, "bridge: note: istio.enabled is false: a running bridge would not serve these")
				cfg.Istio.Enabled = true
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			rs, err := bridge.Snapshot(ctx, cfg, dumpLogger(cmd, cfg, stderr))
			if err != nil {
				return fmt.Errorf("reading the sources: %w", err)
			}
			node := bridge.Client(id, cluster, grpc)
			d, err := bridge.ForNode(rs, node, cfg.ScopeRules, types...)
			if err != nil {
				return err
			}
			_, scope := cfg.ScopeRules.Of(node)
			for _, url := range types {
				if len(d[url]) == 0 {
					fmt.Fprintln(stderr, "bridge: note:", emptyHint(url, grpc, cfg.XDS.GRPC.Enabled, countType(rs, url), scope))
				}
			}
			if mcp {
				return printMCP(stdout, d, types, format == "yaml")
			}
			opts := bridge.DumpOptions{Types: types}
			if len(types) == 0 {
				opts.Node = node
			}
			return printDump(stdout, d, opts, format == "yaml")
		},
	}
	f := cmd.Flags()
	// Of the flags that override the file only --log-level matters to a
	// dry run: it listens on nothing.
	f.StringP("config", "c", "", "configuration file (YAML); or give it as the argument")
	f.String("log-level", "", "log level on stderr: debug, info, warn or error (default warn here)")
	f.String("node-id", "", "the node's id")
	f.String("node-cluster", "", "the node's cluster")
	f.Bool("grpc", false, "the node is a proxyless gRPC client (default: an Envoy)")
	f.StringSlice("type", nil, "only these types, comma-separated, any case: cds, eds, lds, rds, sds; or serviceentry, workloadentry")
	f.Bool("mcp", false, "print the Istio MCP collections istiod would receive (serviceentry, workloadentry)")
	f.String("format", "yaml", "output format: yaml or json")
	f.Duration("timeout", 30*time.Second, "how long to wait for every source to read its registry once")
	return cmd
}

// printDump writes d as Envoy's config dump (see bridge.ConfigDump), in
// YAML or JSON.
func printDump(w io.Writer, d xds.Dump, opts bridge.DumpOptions, yamlOut bool) error {
	cd, err := bridge.ConfigDump(d, opts)
	if err != nil {
		return err
	}
	out, err := bridge.Render(cd, yamlOut)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// Short type names: those of Envoy's types, which every command takes,
// and those of Istio's collections, which only dump serves.
var (
	envoyTypes = []string{"cds", "eds", "lds", "rds", "sds"}
	dumpTypes  = append(slices.Clone(envoyTypes), "serviceentry", "workloadentry")
)

// typeURLs maps the names given to --type (any case, lists or repeated
// flags) to type URLs in Envoy's dump order, without duplicates; allowed
// are the short names the command takes.
func typeURLs(names, allowed []string) ([]string, error) {
	var urls []string
	for _, n := range names {
		short := strings.ToLower(strings.TrimSpace(n))
		if !slices.Contains(allowed, short) {
			return nil, usageError{fmt.Errorf("--type: unknown type %q (want %s or %s)", n,
				strings.Join(allowed[:len(allowed)-1], ", "), allowed[len(allowed)-1])}
		}
		if url := bridge.TypeURLs[short]; !slices.Contains(urls, url) {
			urls = append(urls, url)
		}
	}
	return urls, nil
}

// dumpLogger logs warnings and errors only, unless --log-level or
// BRIDGE_LOG_LEVEL asks for more: a dry run's stdout is the product, and
// the INFO lines of a starting bridge are noise around it.
func dumpLogger(cmd *cobra.Command, cfg *config.Config, stderr io.Writer) *slog.Logger {
	l := cfg.Log
	if !cmd.Flags().Changed("log-level") && os.Getenv("BRIDGE_LOG_LEVEL") == "" {
		l.Level = "warn"
	}
	return l.NewLogger(stderr)
}

// countType counts the resources of rs of type url.
func countType(rs []xds.Resource, url string) int {
	n := 0
	for _, r := range rs {
		if r.Type == url {
			n++
		}
	}
	return n
}

// emptyHint says why a type asked for has no resources for the node:
// served is how many the bridge has of it for any node, scope the name of
// the node's scope ("" without one).
func emptyHint(url string, grpc, grpcEnabled bool, served int, scope string) string {
	what := map[string]string{
		resource.ClusterType: "clusters", resource.EndpointType: "endpoints",
		resource.ListenerType: "listeners", resource.RouteType: "routes", resource.SecretType: "secrets",
		bridge.MCPDumpTypes[0]: "ServiceEntries", bridge.MCPDumpTypes[1]: "WorkloadEntries",
	}[url]
	if url == bridge.MCPDumpTypes[1] {
		return "no WorkloadEntries: istio.shape is not workload_entries, or the sources reported no endpoints to serve"
	}
	switch {
	case url == resource.SecretType && scope == "":
		return "no secrets: secrets go only to the nodes of the scopes granted them (secrets[].grant), and this node is in no scope"
	case url == resource.SecretType:
		return fmt.Sprintf("no secrets for this node: its scope %q is granted none (secrets[].grant)", scope)
	case (url == resource.ListenerType || url == resource.RouteType) && !grpc:
		return "no " + what + ": the configuration has none for Envoys (listeners, routes, resources); the proxyless gRPC chain goes to gRPC clients only (add --grpc)"
	case (url == resource.ListenerType || url == resource.RouteType) && !grpcEnabled:
		return "no " + what + ": xds.grpc.enabled is false, so there are no gRPC listeners or routes"
	case served > 0 && scope != "":
		return fmt.Sprintf("no %s for this node: its scope %q leaves out all %d the bridge has (see scopes in the configuration)", what, scope, served)
	case served > 0:
		return fmt.Sprintf("no %s for this node, of the %d the bridge has", what, served)
	}
	return "no " + what + ": the sources reported no services"
}
