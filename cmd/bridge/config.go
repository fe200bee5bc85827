package main

import (
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsbridge/xdsbridge/bridge"
)

// configCmd is `bridge config NODE`: what a connected node holds, like
// istioctl proxy-config, in the shape of Envoy's config dump.
func configCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config NODE [--type cds,eds,lds,rds,sds] [--format table|json|yaml] [--admin URL]",
		Short: "Show what a node connected to a running bridge holds",
		Long: `Config reads a running bridge's /debug/config_dump?node=NODE: every
resource the bridge sent to that node's streams and did not remove since.
The table lists type, name and version; --format json or yaml prints
Envoy's config dump (the shape of the node's own /config_dump, proto field
names, private keys redacted), limited to --type when given.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("a node id is required: bridge config NODE (see bridge status)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := formatFlag(cmd, "table", "json", "yaml")
			if err != nil {
				return err
			}
			names, _ := cmd.Flags().GetStringSlice("type")
			types, err := typeURLs(names, envoyTypes)
			if err != nil {
				return err
			}
			c, err := newAdminClient(cmd)
			if err != nil {
				return err
			}
			body, err := c.getOK(cmd.Context(), "/debug/config_dump?"+nodeQuery(args[0]))
			if err != nil {
				return err
			}
			var cd adminv3.ConfigDump
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &cd); err != nil {
				return fmt.Errorf("decoding the config dump: %w", err)
			}
			d, opts, err := bridge.Unpack(&cd)
			if err != nil {
				return err
			}
			if len(types) > 0 {
				opts.Types, opts.Node = types, nil
			}
			if format == "table" {
				tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "TYPE\tNAME\tVERSION")
				for _, url := range opts.Types {
					for _, r := range d[url] {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", shortType(url), cmp.Or(r.Name, "-"), r.Version)
					}
				}
				return tw.Flush()
			}
			return printDump(stdout, d, opts, format == "yaml")
		},
	}
	adminFlags(cmd)
	cmd.Flags().StringSlice("type", nil, "only these types, comma-separated, any case: cds, eds, lds, rds, sds")
	cmd.Flags().String("format", "table", "output format: table, json or yaml")
	return cmd
}
