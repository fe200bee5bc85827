package wire

import (
	"sync"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Responses are assembled from bytes encoded once per resource version.
//
// Marshalling every response for every client would make most of the
// server's CPU and of its peak memory in a cold start the same bytes built
// again for each client: a client's initial state is one large message.
// Protobuf encodes a repeated message field as the concatenation of its
// records, and DiscoveryResponse.resources,
// DeltaDiscoveryResponse.resources and Resource.resource all have field
// number 2, so one buffer per entry holds every form a client can receive:
//
//	[2: len] [3: name] [2: len [1: type_url] [2: value]] [1: version]
//	└──────────────── delta Resource record ─────────────────────────┘
//	                   └──── SotW resources record ───┘
//	                                        └ Any.value ┘
//
// Resource's fields are written name, resource, version rather than in
// field-number order; decoders accept any order (the encoding spec requires
// it), and the result decodes to the same message. A response is then a
// mem.BufferSlice of a few envelope bytes and the shared records, which
// gRPC writes without copying them per client (Codec recognises it). Under
// another codec the response is marshalled from the same Any values, built
// only when that codec asks for it.

// Field numbers of the records above.
const (
	fAnyTypeURL = 1 // Any.type_url
	fAnyValue   = 2 // Any.value
	fResVersion = 1 // Resource.version
	fResAny     = 2 // Resource.resource
	fResName    = 3 // Resource.name
	fResources  = 2 // DiscoveryResponse.resources, DeltaDiscoveryResponse.resources

	fVersionInfo = 1 // DiscoveryResponse.version_info, Delta...system_version_info
	fTypeURL     = 4 // type_url in both responses
	fNonce       = 5 // nonce in both responses
	fRemoved     = 6 // DeltaDiscoveryResponse.removed_resources
)

// Record is the encoded form of one resource version; see the comment above. The buffers
// are created once, since turning a []byte into a mem.Buffer allocates.
type Record struct {
	Delta mem.Buffer // the delta Resource record
	SotW  mem.Buffer // the SotW resources record
}

// EncodeRecord builds the shared record of a resource of type typeURL whose
// marshalled message is value, and returns it with the Any whose Value
// aliases the record's bytes.
func EncodeRecord(typeURL, name, version string, value []byte) (Record, *anypb.Any) {
	anyLen := strLen(len(typeURL)) + strLen(len(value))
	resLen := strLen(len(name)) + FieldLen(anyLen) + strLen(len(version))
	b := make([]byte, 0, FieldLen(resLen))
	b = appendTagLen(b, fResources, resLen)
	b = appendString(b, fResName, name)
	sotwAt := len(b)
	b = appendTagLen(b, fResAny, anyLen)
	b = appendString(b, fAnyTypeURL, typeURL)
	b = appendString(b, fAnyValue, value)
	valueAt := len(b) - len(value)
	sotwEnd := len(b)
	b = appendString(b, fResVersion, version)
	a := &anypb.Any{TypeUrl: typeURL, Value: b[valueAt:sotwEnd:sotwEnd]}
	return Record{Delta: mem.SliceBuffer(b), SotW: mem.SliceBuffer(b[sotwAt:sotwEnd:sotwEnd])}, a
}

// FieldLen is the encoded size of a length-delimited field of n bytes
// (tags of fields 1 to 15 take one byte).
func FieldLen(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// strLen is fieldLen of a proto3 string or bytes field, omitted when empty.
func strLen(n int) int {
	if n == 0 {
		return 0
	}
	return FieldLen(n)
}

func appendTagLen(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

func appendString[S ~string | ~[]byte](b []byte, num protowire.Number, s S) []byte {
	if len(s) == 0 {
		return b // proto3 omits empty strings and bytes
	}
	b = appendTagLen(b, num, len(s))
	return append(b, s...)
}

// Written as one buffer per record, an initial state is a buffer per
// resource for gRPC, whose writer walks them for each HTTP/2 frame it
// writes, allocating a slice of them each time: a large share of the
// server's CPU in a cold start. So a frame also holds its records concatenated,
// built once and shared by every client, and a response remembers which of
// its entries are consecutive records of its frame (runs), to send each
// run as one buffer.

// Records are the frame's SotW or delta records back to back: record i is
// b[off[i]:off[i+1]].
type Records struct {
	Once sync.Once
	Buf  []byte
	Off  []int
}

// Run is list[at:at+to-from] of a response: the records from to to of its
// frame.
type Run struct{ At, From, To int }

// Envelope holds what a response carries besides its resources.
type Envelope struct {
	Version, TypeURL, Nonce string
}

// Head and Tail are the envelope's bytes before and after the resources, in
// field-number order as proto.Marshal writes them.
func (e Envelope) Head() []byte { return appendString(nil, fVersionInfo, e.Version) }

// Tail is the envelope's bytes after the resources (see Head), with the
// removed names.
func (e Envelope) Tail(removed []string) []byte {
	n := strLen(len(e.TypeURL)) + strLen(len(e.Nonce))
	for _, r := range removed {
		n += FieldLen(len(r))
	}
	b := make([]byte, 0, n)
	b = appendString(b, fTypeURL, e.TypeURL)
	b = appendString(b, fNonce, e.Nonce)
	for _, r := range removed {
		b = appendTagLen(b, fRemoved, len(r)) // repeated: empty ones count
		b = append(b, r...)
	}
	return b
}

// Deterministic is the marshal whose output a resource version is the
// content hash of: identical input gives identical bytes on every replica.
var Deterministic = proto.MarshalOptions{Deterministic: true}
