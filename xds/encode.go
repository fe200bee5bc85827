package xds

import (
	"sync"
	"sync/atomic"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
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

// wire is the encoded form of one entry; see the comment above. The buffers
// are created once, since turning a []byte into a mem.Buffer allocates.
type wire struct {
	delta mem.Buffer // the delta Resource record
	sotw  mem.Buffer // the SotW resources record
}

// encodeEntry builds the shared record of a resource of type typeURL whose
// marshalled message is value, and returns it with the Any whose Value
// aliases the record's bytes.
func encodeEntry(typeURL, name, version string, value []byte) (wire, *anypb.Any) {
	anyLen := strLen(len(typeURL)) + strLen(len(value))
	resLen := strLen(len(name)) + fieldLen(anyLen) + strLen(len(version))
	b := make([]byte, 0, fieldLen(resLen))
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
	return wire{delta: mem.SliceBuffer(b), sotw: mem.SliceBuffer(b[sotwAt:sotwEnd:sotwEnd])}, a
}

// fieldLen is the encoded size of a length-delimited field of n bytes
// (tags of fields 1 to 15 take one byte).
func fieldLen(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// strLen is fieldLen of a proto3 string or bytes field, omitted when empty.
func strLen(n int) int {
	if n == 0 {
		return 0
	}
	return fieldLen(n)
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

// record is the entry's delta Resource record or SotW resources record.
func (e *entry) record(delta bool) mem.Buffer {
	if delta {
		return e.wire.delta
	}
	return e.wire.sotw
}

// recLen is the size of e's record in a response of the given protocol.
func (e *entry) recLen(delta bool) int { return len(e.record(delta).ReadOnlyData()) }

// Written as one buffer per record, an initial state is a buffer per
// resource for gRPC, whose writer walks them for each HTTP/2 frame it
// writes, allocating a slice of them each time: a large share of the
// server's CPU in a cold start. So a frame also holds its records concatenated,
// built once and shared by every client, and a response remembers which of
// its entries are consecutive records of its frame (runs), to send each
// run as one buffer.

// records are the frame's SotW or delta records back to back: record i is
// b[off[i]:off[i+1]].
type records struct {
	once sync.Once
	b    []byte
	off  []int
}

// frameRun is list[at:at+to-from] of a response: the records from to to of its
// frame.
type frameRun struct{ at, from, to int }

// records returns the frame's records of one form, concatenating them on
// first use (safe from any writer).
func (f *frame) records(delta bool) *records {
	r := &f.recs[0]
	if delta {
		r = &f.recs[1]
	}
	r.once.Do(func() {
		n := 0
		for _, e := range f.entries {
			n += e.recLen(delta)
		}
		r.b, r.off = make([]byte, 0, n), make([]int, 0, len(f.entries)+1)
		for _, e := range f.entries {
			r.off = append(r.off, len(r.b))
			r.b = append(r.b, e.record(delta).ReadOnlyData()...)
		}
		r.off = append(r.off, len(r.b))
	})
	return r
}

// appendRecords appends the records of list to bs, each run of fr as one
// buffer.
func appendRecords(bs mem.BufferSlice, list []*entry, fr *frame, runs []frameRun, delta bool) mem.BufferSlice {
	for i := 0; i < len(list); {
		if len(runs) > 0 && runs[0].at == i {
			r, recs := runs[0], fr.records(delta)
			bs = append(bs, mem.SliceBuffer(recs.b[recs.off[r.from]:recs.off[r.to]]))
			runs, i = runs[1:], i+r.to-r.from
			continue
		}
		bs = append(bs, list[i].record(delta))
		i++
	}
	return bs
}

// charge is what a response of list keeps alive (see budget): the bytes
// of its records outside runs, and the records of fr the runs slice.
func charge(list []*entry, fr *frame, runs []frameRun, delta bool) (own int, shared *records) {
	if len(runs) > 0 {
		shared = fr.records(delta)
	}
	own, _ = listBytes(list, fr, runs, delta)
	return own, shared
}

// listBytes is the size of list's records outside runs (own) and in the
// runs of fr, without reading the entries of a run: a whole initial state
// is one run.
func listBytes(list []*entry, fr *frame, runs []frameRun, delta bool) (own, inRuns int) {
	for i := 0; i < len(list); {
		if len(runs) > 0 && runs[0].at == i {
			r, recs := runs[0], fr.records(delta)
			inRuns += recs.off[r.to] - recs.off[r.from]
			i += r.to - r.from
			runs = runs[1:]
			continue
		}
		own += list[i].recLen(delta)
		i++
	}
	return own, inRuns
}

// buffersFor is the capacity of a response's buffer list: the envelope's
// two, one per run and one per entry outside the runs.
func buffersFor(list []*entry, runs []frameRun) int {
	n := len(list) + 2
	for _, r := range runs {
		n -= r.to - r.from - 1
	}
	return n
}

// envelope holds what a response carries besides its resources.
type envelope struct {
	version, typeURL, nonce string
}

// head and tail are the envelope's bytes before and after the resources, in
// field-number order as proto.Marshal writes them.
func (e envelope) head() []byte { return appendString(nil, fVersionInfo, e.version) }

func (e envelope) tail(removed []string) []byte {
	n := strLen(len(e.typeURL)) + strLen(len(e.nonce))
	for _, r := range removed {
		n += fieldLen(len(r))
	}
	b := make([]byte, 0, n)
	b = appendString(b, fTypeURL, e.typeURL)
	b = appendString(b, fNonce, e.nonce)
	for _, r := range removed {
		b = appendTagLen(b, fRemoved, len(r)) // repeated: empty ones count
		b = append(b, r...)
	}
	return b
}

// wireMsg is a response as handed to gRPC: Codec sends its buffers; any
// other codec sees a proto.Message (built on first use).
type wireMsg interface {
	protoreflect.ProtoMessage
	buffers() mem.BufferSlice
	sendState() *tracking
	// charge is what the response keeps alive in flight, for the send
	// budget: the bytes of its records outside frame runs, and the frame
	// records its runs slice (nil without runs).
	charge() (own int, shared *records)
}

// tracking ties a response to its share of the send budget.
type tracking struct {
	g       *grant      // nil: not budgeted
	encoded atomic.Bool // buffers were handed out: their last Free releases g
}

func (t *tracking) sendState() *tracking { return t }

// assemble is a response's buffers: the envelope's head, the records of
// list (each run of fr as one buffer), and the envelope's tail with the
// removed names, whose buffer releases the grant once gRPC has written it.
func (t *tracking) assemble(env envelope, list []*entry, fr *frame, runs []frameRun, removed []string, delta bool) mem.BufferSlice {
	bs := make(mem.BufferSlice, 0, buffersFor(list, runs))
	bs = append(bs, mem.SliceBuffer(env.head()))
	bs = appendRecords(bs, list, fr, runs, delta)
	t.encoded.Store(true)
	return append(bs, trackedTail(env.tail(removed), t.g))
}

// A full-state SotW response (CDS, LDS, a collection) lists everything the
// client holds, so a push of one changed resource would otherwise walk,
// size and hand gRPC every record of the type, for every client: at 10,000
// resources that walk is most of what the push costs. A watch that is up to
// date holds the type's shared chunks (held.go), immutable and the same for
// every such client, and an Apply replaces only the chunks it touched. So a
// shared chunk's records are concatenated once, on first use, and a
// full-state response is the held set a chunk at a time: a shared chunk as
// one buffer, the entries of a chunk of the watch's own one by one. The
// bytes are those of the entry-by-entry form, in the same order.

// chunkRecords are a shared chunk's SotW records back to back, in slot
// order, with the number of entries and the size of their messages.
type chunkRecords struct {
	buf  mem.Buffer
	n    int
	size int // sum of entry.size
}

// records returns c's records, concatenating them on first use. c must be
// shared: a shared chunk is never written again. Safe from any writer.
func (c *heldChunk) records() *chunkRecords {
	if r := c.recs.Load(); r != nil {
		return r
	}
	n := 0
	for _, e := range c.e {
		if e != nil && e != none {
			n += e.recLen(false)
		}
	}
	r, b := &chunkRecords{}, make([]byte, 0, n)
	for _, e := range c.e {
		if e != nil && e != none {
			b = append(b, e.record(false).ReadOnlyData()...)
			r.n++
			r.size += e.size
		}
	}
	r.buf = mem.SliceBuffer(b)
	if !c.recs.CompareAndSwap(nil, r) {
		return c.recs.Load()
	}
	return r
}

// piece is a run of a full-state response: every entry of a shared chunk
// (c), or one entry (e).
type piece struct {
	c *heldChunk
	e *entry
}

// pieces is what a full-state response lists for a watch holding h, in
// the order entries yields it, with the number of entries and the size of
// their messages. The pieces stay valid after client.mu is released: a
// shared chunk is immutable, and an own chunk is listed by its entries.
// client.mu held.
func (h *heldSet) pieces() (ps []piece, n, size int) {
	if h.dense == nil {
		ps = make([]piece, 0, len(h.m))
		for _, e := range h.m {
			if e != nil {
				ps, n, size = append(ps, piece{e: e}), n+1, size+e.size
			}
		}
		return ps, n, size
	}
	for _, c := range h.dense {
		switch {
		case c == nil:
		case c.shared:
			if r := c.records(); r.n > 0 {
				ps, n, size = append(ps, piece{c: c}), n+r.n, size+r.size
			}
		default:
			for _, e := range c.e {
				if e != nil && e != none {
					ps, n, size = append(ps, piece{e: e}), n+1, size+e.size
				}
			}
		}
	}
	return ps, n, size
}

// sotwMsg is a DiscoveryResponse carrying list, or, for a full-state
// response, pieces.
type sotwMsg struct {
	tracking
	env  envelope
	list []*entry
	fr   *frame // with runs: records of list sent as one buffer (see frameRun)
	runs []frameRun
	// pieces, when not nil, are the resources instead of list.
	pieces []piece

	once sync.Once
	pb   *discoveryv3.DiscoveryResponse
}

func (m *sotwMsg) buffers() mem.BufferSlice {
	if m.pieces == nil {
		return m.assemble(m.env, m.list, m.fr, m.runs, nil, false)
	}
	bs := make(mem.BufferSlice, 0, len(m.pieces)+2)
	bs = append(bs, mem.SliceBuffer(m.env.head()))
	for _, p := range m.pieces {
		if p.c != nil {
			bs = append(bs, p.c.records().buf)
		} else {
			bs = append(bs, p.e.record(false))
		}
	}
	m.encoded.Store(true)
	return append(bs, trackedTail(m.env.tail(nil), m.g))
}

// charge: the records of pieces count as the response's own, as those of
// a list outside frame runs do.
func (m *sotwMsg) charge() (int, *records) {
	if m.pieces == nil {
		return charge(m.list, m.fr, m.runs, false)
	}
	own := 0
	for _, p := range m.pieces {
		if p.c != nil {
			own += p.c.records().buf.Len()
		} else {
			own += p.e.recLen(false)
		}
	}
	return own, nil
}

// entries are the entries the response carries, in order.
func (m *sotwMsg) entries() []*entry {
	if m.pieces == nil {
		return m.list
	}
	var out []*entry
	for _, p := range m.pieces {
		if p.c == nil {
			out = append(out, p.e)
			continue
		}
		for _, e := range p.c.e {
			if e != nil && e != none {
				out = append(out, e)
			}
		}
	}
	return out
}

// proto is the response as a message, for other codecs and tests.
func (m *sotwMsg) proto() *discoveryv3.DiscoveryResponse {
	m.once.Do(func() {
		list := m.entries()
		m.pb = &discoveryv3.DiscoveryResponse{
			VersionInfo: m.env.version,
			TypeUrl:     m.env.typeURL,
			Nonce:       m.env.nonce,
			Resources:   make([]*anypb.Any, len(list)),
		}
		for i, e := range list {
			m.pb.Resources[i] = e.any
		}
	})
	return m.pb
}

func (m *sotwMsg) ProtoReflect() protoreflect.Message { return m.proto().ProtoReflect() }

// deltaMsg is a DeltaDiscoveryResponse carrying list and removed.
type deltaMsg struct {
	tracking
	env     envelope
	list    []*entry
	removed []string
	fr      *frame // as in sotwMsg
	runs    []frameRun

	once sync.Once
	pb   *discoveryv3.DeltaDiscoveryResponse
}

func (m *deltaMsg) buffers() mem.BufferSlice {
	return m.assemble(m.env, m.list, m.fr, m.runs, m.removed, true)
}

func (m *deltaMsg) charge() (int, *records) { return charge(m.list, m.fr, m.runs, true) }

func (m *deltaMsg) proto() *discoveryv3.DeltaDiscoveryResponse {
	m.once.Do(func() {
		m.pb = &discoveryv3.DeltaDiscoveryResponse{
			SystemVersionInfo: m.env.version,
			TypeUrl:           m.env.typeURL,
			Nonce:             m.env.nonce,
			Resources:         make([]*discoveryv3.Resource, len(m.list)),
			RemovedResources:  m.removed,
		}
		for i, e := range m.list {
			m.pb.Resources[i] = &discoveryv3.Resource{Name: e.name, Version: e.version, Resource: e.any}
		}
	})
	return m.pb
}

func (m *deltaMsg) ProtoReflect() protoreflect.Message { return m.proto().ProtoReflect() }

var (
	_ wireMsg = (*sotwMsg)(nil)
	_ wireMsg = (*deltaMsg)(nil)
)
