package bridge

import "google.golang.org/grpc"

// TransportOptions are the gRPC server options of the xDS listener that
// set what each connection costs, beside the engine's own
// (xds.Server.GRPCOptions: request size, streams, receive windows). The
// benchmark's servers get them too, so that what it measures is the
// bridge's transport.
func TransportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{}
}
