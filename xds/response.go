package xds

import (
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// appendRecords appends the records of list to bs, each run of fr as one
// buffer.
func appendRecords(bs mem.BufferSlice, list []*entry, fr *frame, runs []wire.Run, delta bool) mem.BufferSlice {
	for i := 0; i < len(list); {
		if len(runs) > 0 && runs[0].At == i {
			r, recs := runs[0], fr.records(delta)
			bs = append(bs, mem.SliceBuffer(recs.Buf[recs.Off[r.From]:recs.Off[r.To]]))
			runs, i = runs[1:], i+r.To-r.From
			continue
		}
		bs = append(bs, list[i].record(delta))
		i++
	}
	return bs
}

// listCharge is what a response of list keeps alive (see budget): the bytes
// of its records outside runs, and the records of fr the runs slice.
func listCharge(list []*entry, fr *frame, runs []wire.Run, delta bool) (own int, shared *wire.Records) {
	if len(runs) > 0 {
		shared = fr.records(delta)
	}
	own, _ = listBytes(list, fr, runs, delta)
	return own, shared
}

// listBytes is the size of list's records outside runs (own) and in the
// runs of fr, without reading the entries of a run: a whole initial state
// is one run.
func listBytes(list []*entry, fr *frame, runs []wire.Run, delta bool) (own, inRuns int) {
	for i := 0; i < len(list); {
		if len(runs) > 0 && runs[0].At == i {
			r, recs := runs[0], fr.records(delta)
			inRuns += recs.Off[r.To] - recs.Off[r.From]
			i += r.To - r.From
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
func buffersFor(list []*entry, runs []wire.Run) int {
	n := len(list) + 2
	for _, r := range runs {
		n -= r.To - r.From - 1
	}
	return n
}

// assemble is a response's buffers: the envelope's head, the records of
// list (each run of fr as one buffer), and the envelope's tail with the
// removed names, whose buffer releases the grant once gRPC has written it.
func assemble(t *wire.Tracking, env wire.Envelope, list []*entry, fr *frame, runs []wire.Run, removed []string, delta bool) mem.BufferSlice {
	bs := make(mem.BufferSlice, 0, buffersFor(list, runs))
	bs = append(bs, mem.SliceBuffer(env.Head()))
	bs = appendRecords(bs, list, fr, runs, delta)
	t.Encoded.Store(true)
	return append(bs, wire.TrackedTail(env.Tail(removed), t.Grant))
}

// piece is a run of a full-state response: every entry of a shared chunk
// (c), or one entry (e).
type piece struct {
	c *sentChunk
	e *entry
}

// pieces is what a full-state response lists for a watch holding h, in
// the order entries yields it, with the number of entries and the size of
// their messages. The pieces stay valid after client.mu is released: a
// shared chunk is immutable, and an own chunk is listed by its entries.
// client.mu held.
func (h *sentSet) pieces() (ps []piece, n, size int) {
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
	wire.Tracking
	env  wire.Envelope
	list []*entry
	fr   *frame // with runs: records of list sent as one buffer (see frameRun)
	runs []wire.Run
	// pieces, when not nil, are the resources instead of list.
	pieces []piece

	once sync.Once
	pb   *discoveryv3.DiscoveryResponse
}

func (m *sotwMsg) Buffers() mem.BufferSlice {
	if m.pieces == nil {
		return assemble(&m.Tracking, m.env, m.list, m.fr, m.runs, nil, false)
	}
	bs := make(mem.BufferSlice, 0, len(m.pieces)+2)
	bs = append(bs, mem.SliceBuffer(m.env.Head()))
	for _, p := range m.pieces {
		if p.c != nil {
			bs = append(bs, p.c.records().buf)
		} else {
			bs = append(bs, p.e.record(false))
		}
	}
	m.Encoded.Store(true)
	return append(bs, wire.TrackedTail(m.env.Tail(nil), m.Grant))
}

// charge: the records of pieces count as the response's own, as those of
// a list outside frame runs do.
func (m *sotwMsg) Charge() (int, *wire.Records) {
	if m.pieces == nil {
		return listCharge(m.list, m.fr, m.runs, false)
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
			VersionInfo: m.env.Version,
			TypeUrl:     m.env.TypeURL,
			Nonce:       m.env.Nonce,
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
	wire.Tracking
	env     wire.Envelope
	list    []*entry
	removed []string
	fr      *frame // as in sotwMsg
	runs    []wire.Run

	once sync.Once
	pb   *discoveryv3.DeltaDiscoveryResponse
}

func (m *deltaMsg) Buffers() mem.BufferSlice {
	return assemble(&m.Tracking, m.env, m.list, m.fr, m.runs, m.removed, true)
}

func (m *deltaMsg) Charge() (int, *wire.Records) { return listCharge(m.list, m.fr, m.runs, true) }

func (m *deltaMsg) proto() *discoveryv3.DeltaDiscoveryResponse {
	m.once.Do(func() {
		m.pb = &discoveryv3.DeltaDiscoveryResponse{
			SystemVersionInfo: m.env.Version,
			TypeUrl:           m.env.TypeURL,
			Nonce:             m.env.Nonce,
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
	_ wire.Msg = (*sotwMsg)(nil)
	_ wire.Msg = (*deltaMsg)(nil)
)

// outbound is one response ready to send, with what it carries for metrics.
type outbound struct {
	msg       wire.Msg // a *sotwMsg or *deltaMsg
	t         *typeState
	resources int
	bytes     int
}
