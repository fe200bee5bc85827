package bridge

import "google.golang.org/grpc"

// TransportOptions are the gRPC server options of the xDS listener that set
// what each connection costs, beside the engine's own
// (xds.Server.GRPCOptions: request size, streams, receive windows). The
// benchmark's servers get them too, so that what it measures is the
// bridge's transport.
//
// An idle connection holds no transport buffer: gRPC takes its write
// buffer from a pool shared by all connections for the length of a write
// and its read buffer for the length of a read. The write buffer's sharing
// is gRPC's default, which no option needs to set any more (the memory per
// client depends on it). The buffers' size is left at gRPC's: smaller ones
// lower the peak that a cold start of every client at once reaches, but
// not the memory of a connected client, and cost more system calls per
// initial state.
func TransportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{}
}
