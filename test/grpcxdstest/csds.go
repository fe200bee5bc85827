package grpcxdstest

import (
	"context"
	"fmt"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
)

// Key names one resource of an xDS client: its type URL and name.
type Key struct{ TypeURL, Name string }

// ResourceStatus is what grpc-go's xDS client reports of one resource
// through its Client Status Discovery Service (google.golang.org/grpc/xds/csds):
// the oracle of what the real client accepted, rather than what the
// server believes it sent.
type ResourceStatus struct {
	// Status is the client's status of the resource: ACKED, NACKED,
	// REQUESTED (asked for, nothing received yet), DOES_NOT_EXIST, ...
	Status string
	// Version is the version_info of the response the client took the
	// resource it holds from (empty if it holds none).
	Version string
	// Error and ErrorVersion are, for a resource the client rejected, why
	// and the version_info of the response it rejected.
	Error, ErrorVersion string
	// Resource is the resource the client holds: the last one it ACKed
	// (nil if none).
	Resource *anypb.Any
}

// ClientStatus asks the CSDS server at addr (a process whose xDS clients
// it reports, such as the example client run with --csds) for every
// resource its xDS clients hold or asked for.
func ClientStatus(ctx context.Context, addr string) (map[Key]ResourceStatus, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dialling CSDS at %s: %w", addr, err)
	}
	defer conn.Close()
	return fetchStatus(ctx, statusv3.NewClientStatusDiscoveryServiceClient(conn), addr)
}

// fetchStatus is ClientStatus over an open CSDS client.
func fetchStatus(ctx context.Context, c statusv3.ClientStatusDiscoveryServiceClient, addr string) (map[Key]ResourceStatus, error) {
	resp, err := c.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
	if err != nil {
		return nil, fmt.Errorf("fetching the client status from %s: %w", addr, err)
	}
	out := map[Key]ResourceStatus{}
	for _, cfg := range resp.GetConfig() {
		for _, x := range cfg.GetGenericXdsConfigs() {
			out[Key{x.GetTypeUrl(), x.GetName()}] = ResourceStatus{
				Status:       x.GetClientStatus().String(),
				Version:      x.GetVersionInfo(),
				Error:        x.GetErrorState().GetDetails(),
				ErrorVersion: x.GetErrorState().GetVersionInfo(),
				Resource:     x.GetXdsConfig(),
			}
		}
	}
	return out, nil
}
