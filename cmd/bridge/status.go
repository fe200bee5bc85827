package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/xds"
)

// statusCmd is `bridge status`: the connected clients of a running bridge
// and how far each is behind, like istioctl proxy-status.
func statusCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [NODE] [--admin URL] [--format table|json]",
		Short: "Show the connected xDS clients of a running bridge, worst first",
		Long: `Status reads a running bridge's /clients and prints one line per xDS
stream: per type (CDS, EDS, LDS, RDS) SYNCED N (everything sent is ACKed;
a stream's versions count the responses of that type sent on it, so N is
the number of the latest), STALE A/S (A ACKed of S sent, or changes not
sent yet), NACKED N (response N, the latest answered, was rejected) or -
(not subscribed); BEHIND counts the responses not ACKed plus the changes
not sent; LAST NACK the latest rejection. Clients that are NACKing come
first, then the most behind; a legend follows the table.

With NODE, it prints that node's streams in detail: versions sent and
ACKed, the subscribed names (the first 100 and the count) and the last
NACK of each type. --format json prints /clients' entries as they are.`,
		Args: maxOneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := formatFlag(cmd, "table", "json")
			if err != nil {
				return err
			}
			c, err := newAdminClient(cmd)
			if err != nil {
				return err
			}
			var clients []xds.ClientStatus
			if err := c.getJSON(cmd.Context(), "/clients", &clients); err != nil {
				return err
			}
			if len(args) == 1 {
				clients = slices.DeleteFunc(clients, func(cs xds.ClientStatus) bool { return cs.ID != args[0] })
				if len(clients) == 0 {
					return fmt.Errorf("no xDS stream of node %q is connected", args[0])
				}
			}
			worstFirst(clients)
			switch {
			case format == "json":
				return writeJSON(stdout, clients)
			case len(args) == 1:
				return nodeDetail(stdout, clients, time.Now())
			}
			return statusTable(stdout, clients, time.Now())
		},
	}
	adminFlags(cmd)
	cmd.Flags().String("format", "table", "output format: table or json")
	return cmd
}

// formatFlag is --format lowered, checked against the allowed values.
func formatFlag(cmd *cobra.Command, allowed ...string) (string, error) {
	f, _ := cmd.Flags().GetString("format")
	f = strings.ToLower(f)
	if !slices.Contains(allowed, f) {
		return "", usageError{fmt.Errorf("--format: unknown format %q (want %s)", f, strings.Join(allowed, " or "))}
	}
	return f, nil
}

// worstFirst sorts clients that are NACKing first, then by how far they
// are behind, then by node id and connection time.
func worstFirst(clients []xds.ClientStatus) {
	slices.SortStableFunc(clients, func(a, b xds.ClientStatus) int {
		na, ba := health(a)
		nb, bb := health(b)
		if na != nb {
			if na {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(bb, ba), cmp.Compare(a.ID, b.ID), a.Connected.Compare(b.Connected))
	})
}

// health is whether a client is NACKing any type and how far behind it is
// in all (responses not ACKed plus changes not sent).
func health(c xds.ClientStatus) (nacking bool, behind int) {
	for _, t := range c.Types {
		nacking = nacking || t.NACKing()
		behind += t.Lag() + t.Pending
	}
	return nacking, behind
}

// shortTypes are the table's type columns.
var shortTypes = []string{"CDS", "EDS", "LDS", "RDS"}

// shortType names a type URL the way operators say it (CDS, ...).
func shortType(url string) string {
	for short, u := range bridge.TypeURLs {
		if u == url {
			return strings.ToUpper(short)
		}
	}
	return url
}

// typeState is a table cell: the state of one type of a stream.
func typeState(t xds.TypeStatus) string {
	switch {
	case t.NACKing():
		return "NACKED " + t.NACK.Version
	case t.Lag()+t.Pending > 0 || t.LastVersion == "":
		return "STALE " + cmp.Or(t.AckedVersion, "-") + "/" + cmp.Or(t.LastVersion, "-")
	}
	return "SYNCED " + t.AckedVersion
}

// lastNACK is the latest rejection of any type of c, for the table.
func lastNACK(c xds.ClientStatus, now time.Time) string {
	var last *xds.NACKStatus
	var typ string
	for _, t := range c.Types {
		if t.NACK != nil && (last == nil || t.NACK.At.After(last.At)) {
			last, typ = t.NACK, shortType(t.TypeURL)
		}
	}
	if last == nil {
		return "-"
	}
	msg := strings.Join(strings.Fields(last.Error), " ")
	if len(msg) > 60 {
		msg = msg[:57] + "..."
	}
	return fmt.Sprintf("%s %s ago: %s", typ, now.Sub(last.At).Round(time.Second), msg)
}

// statusLegend follows the table: what its cells mean.
const statusLegend = `
SYNCED N: every response sent on the stream is ACKed, N the count of responses of that type sent on it
STALE A/S: A ACKed of S sent (or changes not sent yet); NACKED N: response N was rejected; -: not subscribed
BEHIND: responses not ACKed plus changes not sent; bridge status NODE shows one node in detail
`

func statusTable(w io.Writer, clients []xds.ClientStatus, now time.Time) error {
	if len(clients) == 0 {
		_, err := fmt.Fprintln(w, "no xDS client is connected")
		return err
	}
	defer fmt.Fprint(w, statusLegend)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCLUSTER\tVARIANT\tCDS\tEDS\tLDS\tRDS\tBEHIND\tLAST NACK")
	for _, c := range clients {
		cells := []string{cmp.Or(c.ID, c.Peer), cmp.Or(c.Cluster, "-"), c.Variant}
		for _, s := range shortTypes {
			cell := "-"
			for _, t := range c.Types {
				if shortType(t.TypeURL) == s {
					cell = typeState(t)
				}
			}
			cells = append(cells, cell)
		}
		_, behind := health(c)
		cells = append(cells, fmt.Sprint(behind), lastNACK(c, now))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// nodeDetail prints every stream of one node, type by type.
func nodeDetail(w io.Writer, clients []xds.ClientStatus, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, c := range clients {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "node\t%s\ncluster\t%s\nuser agent\t%s\nvariant\t%s\npeer\t%s\nconnected\t%s (%s ago)\n",
			c.ID, c.Cluster, c.UserAgent, c.Variant, c.Peer, c.Connected.Format(time.RFC3339), now.Sub(c.Connected).Round(time.Second))
		for _, t := range c.Types {
			fmt.Fprintf(tw, "%s\t%s: sent %s, ACKed %s, %d not ACKed, %d changes not sent, holds %d, %d pushes\n",
				shortType(t.TypeURL), typeState(t), cmp.Or(t.LastVersion, "-"), cmp.Or(t.AckedVersion, "-"), t.Lag(), t.Pending, t.Held, t.Pushes)
			names := strings.Join(t.Names, " ")
			if t.Subscribed > len(t.Names) {
				names += fmt.Sprintf(" ... (%d more)", t.Subscribed-len(t.Names))
			}
			if t.Wildcard {
				names = strings.TrimSpace("* " + names)
			}
			fmt.Fprintf(tw, "\tsubscribed %d: %s\n", t.Subscribed, cmp.Or(names, "-"))
			if n := t.NACK; n != nil {
				fmt.Fprintf(tw, "\tlast NACK of version %s, %s ago (%d in all): %s\n", n.Version, now.Sub(n.At).Round(time.Second), n.Count, n.Error)
			}
		}
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// nodeQuery is the query string naming node for the admin API.
func nodeQuery(node string) string { return "node=" + url.QueryEscape(node) }
