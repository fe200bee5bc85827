package main

import (
	"fmt"
	"io"
	"slices"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/xds"
)

// mcpTypes splits the type URLs of `bridge dump` into Envoy's and Istio's
// MCP collections (--mcp adds both collections). A dump shows one or the
// other: Envoy's config dump has no place for MCP resources.
func mcpTypes(types []string, all bool) (mcp bool, out []string, err error) {
	if all {
		for _, url := range bridge.MCPDumpTypes {
			if !slices.Contains(types, url) {
				types = append(types, url)
			}
		}
	}
	n := 0
	for _, url := range types {
		if slices.Contains(bridge.MCPDumpTypes, url) {
			n++
		}
	}
	if n > 0 && n < len(types) {
		return false, nil, usageError{fmt.Errorf("--type: serviceentry and workloadentry (--mcp) cannot be mixed with cds, eds, lds or rds")}
	}
	return n > 0, types, nil
}

// printMCP writes, per collection of types, the DiscoveryResponse istiod
// would receive on its config-source stream (without the per-stream
// version and nonce): YAML documents separated by ---, each after a
// comment naming its collection (protojson puts type_url after the
// resources), or one JSON object after the other.
func printMCP(w io.Writer, d xds.Dump, types []string, yamlOut bool) error {
	for i, url := range types {
		resp := &discoveryv3.DiscoveryResponse{TypeUrl: url, Resources: make([]*anypb.Any, 0, len(d[url]))}
		for _, r := range d[url] {
			resp.Resources = append(resp.Resources, r.Resource)
		}
		out, err := bridge.Render(resp, yamlOut)
		if err != nil {
			return err
		}
		if yamlOut {
			head := fmt.Sprintf("# %s: %d resources\n", url, len(resp.Resources))
			if i > 0 {
				head = "---\n" + head
			}
			out = append([]byte(head), out...)
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}
