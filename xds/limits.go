package xds

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits bound what one client can make the server hold. Everything in a
// request (names, initial versions, type URLs) is client input: a breach
// ends the stream with a gRPC status naming the limit, counted in
// xdsbridge_xds_refused_total{reason}, and everything the stream held is
// freed with it. Zero fields take the DefaultLimits value.
type Limits struct {
	// NamesPerRequest bounds each name list of one request:
	// resource_names (SotW), resource_names_subscribe,
	// resource_names_unsubscribe and initial_resource_versions (delta).
	// Breach: ResourceExhausted.
	NamesPerRequest int
	// NamesPerSubscription bounds the names one stream subscribes to
	// explicitly, per type. Breach: ResourceExhausted.
	NamesPerSubscription int
	// UnknownNames bounds the names without a resource that one stream
	// makes the server track (subscribed to, or claimed in
	// initial_resource_versions with a subscription by name, all types
	// together): the per-client work the server owes and the only lasting
	// per-name state a client can create. Names a wildcard subscription
	// claims are only owed their removal and kept until it is sent; they
	// are bounded by NamesPerRequest. Breach: ResourceExhausted.
	UnknownNames int
	// Streams bounds the streams open at once, over all connections.
	// Breach: ResourceExhausted for the new stream.
	Streams int
	// StreamsPerConnection bounds the streams open at once on one
	// connection (an xDS client needs one, or one per type). Breach:
	// ResourceExhausted for the new stream; GRPCOptions also sets the
	// HTTP/2 limit one above it, so a breach gets that clear status rather
	// than a stream that waits for transport quota.
	StreamsPerConnection int
	// RequestBytes is the largest request message accepted (gRPC's
	// MaxRecvMsgSize, set by GRPCOptions). Breach: ResourceExhausted from
	// gRPC, counted by the engine.
	RequestBytes int
}

// DefaultLimits fit a fleet of 10,000 Envoys subscribed to 20,000 clusters
// each with room to spare (a delta reconnect, which lists every name twice,
// stays under RequestBytes), and keep what a hostile client can make
// the server hold small.
var DefaultLimits = Limits{
	NamesPerRequest:      50000,
	NamesPerSubscription: 50000,
	UnknownNames:         10000,
	Streams:              10000,
	StreamsPerConnection: 64,
	RequestBytes:         4 << 20,
}

// maxUnknownTypes is how many type URLs the server does not serve one stream
// may ask for. Each gets a private, empty store that lives as long as the
// stream (see doc.go); a real client asks for a few at most.
const maxUnknownTypes = 16

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	or := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	d := DefaultLimits
	or(&l.NamesPerRequest, d.NamesPerRequest)
	or(&l.NamesPerSubscription, d.NamesPerSubscription)
	or(&l.UnknownNames, d.UnknownNames)
	or(&l.Streams, d.Streams)
	or(&l.StreamsPerConnection, d.StreamsPerConnection)
	or(&l.RequestBytes, d.RequestBytes)
	return l
}

// The reasons of xdsbridge_xds_refused_total: a fixed set, so that no
// client input becomes a label value.
const (
	reasonNoTypeURL       = "no_type_url"
	reasonUnknownTypes    = "unknown_types"
	reasonNamesPerRequest = "names_per_request"
	reasonNamesPerSub     = "names_per_subscription"
	reasonUnknownNames    = "unknown_names"
	reasonStreams         = "streams"
	reasonStreamsPerConn  = "streams_per_connection"
	reasonRequestBytes    = "request_bytes"
)

// refusalReasons lists every reason, for the series that exist from the
// start.
var refusalReasons = []string{reasonNoTypeURL, reasonUnknownTypes, reasonNamesPerRequest, reasonNamesPerSub,
	reasonUnknownNames, reasonStreams, reasonStreamsPerConn, reasonRequestBytes}

// refusal is a breach: the status the stream ends with and its reason.
type refusal struct {
	reason string
	err    error
}

func newRefusal(reason string, code codes.Code, format string, args ...any) *refusal {
	return &refusal{reason: reason, err: status.Error(code, fmt.Sprintf(format, args...))}
}
