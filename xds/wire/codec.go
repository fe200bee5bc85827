package wire

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"

	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Codec returns the gRPC codec to serve xDS with, as
// grpc.ForceServerCodecV2(xds.Codec()). It sends the engine's responses
// from bytes encoded once per resource version (see encode.go) and decodes
// requests' resource names its own way; all else is the standard proto
// codec.
//
// Every SotW EDS ACK repeats all the names the client subscribes to, a
// string per cluster, and decoding them with the standard codec would be
// the largest part of the server's CPU per change. Identical name lists,
// which a homogeneous fleet sends over and over, are decoded once and
// shared (read-only) from a small cache; other lists are decoded with one
// string allocation instead of one per name.
// Using it is optional: the engine works with the default codec, which then
// marshals every response for every client.
func Codec() encoding.CodecV2 {
	return &codec{base: encoding.GetCodecV2(protoenc.Name), sotw: namesCache{m: map[uint64]*namesEntry{}}, delta: namesCache{m: map[uint64]*namesEntry{}}}
}

const (
	fieldResourceNames = 3  // DiscoveryRequest.resource_names
	minCachedNames     = 16 // shorter lists are cheap to decode anyway
	maxCacheEntries    = 64
	maxCacheBytes      = 4 << 20
	maxSeenLists       = 4096 // hashes of lists seen once (namesCache.seen)
)

type codec struct {
	base encoding.CodecV2
	// The name lists of SotW requests and of delta subscriptions are
	// cached apart: a fleet of unique delta lists (a reconnect of clients
	// subscribed to different names) must not evict the SotW lists whose
	// identity makes every ACK of an unchanged subscription cheap.
	sotw, delta namesCache
}

// namesCache holds recently decoded name lists by the hash of their
// records; bounded by maxCacheEntries and maxCacheBytes of records. A list
// is cached the second time it is seen: what a fleet or a client's ACKs
// repeat is shared from the second request on, and a list sent once (a
// delta subscription to names that came and went) costs no memory after
// its request.
type namesCache struct {
	mu    sync.Mutex
	m     map[uint64]*namesEntry
	bytes int
	seen  map[uint64]struct{} // hashes of lists seen once, at most maxSeenLists
}

type namesEntry struct {
	raw   []byte   // the encoded field-3 records
	names []string // shared: never modified
}

func (c *codec) Name() string { return protoenc.Name }

// Marshal sends the engine's responses (Msg) as their pre-encoded
// buffers, shared by every client (see encode.go); anything else goes to the
// standard codec.
func (c *codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(Msg); ok {
		return m.Buffers(), nil
	}
	return c.base.Marshal(v)
}

// Unmarshal decodes a request, first waiting for its admission when v is
// a stream reader's Inbound (see admit.go).
func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	in, _ := v.(*Inbound)
	if in != nil {
		if err := in.wait(data.Len()); err != nil {
			return err
		}
		v = in.msg
	}
	var dec func([]byte) error
	switch r := v.(type) {
	case *discoveryv3.DiscoveryRequest:
		dec = func(b []byte) error {
			names, err := unmarshalNames(b, r, c.sotw.names)
			if names != nil {
				r.ResourceNames = names
			}
			return err
		}
	case *discoveryv3.DeltaDiscoveryRequest:
		// resource_names_subscribe is field 3 too. An Envoy's first EDS
		// request names every cluster. Each client sends it once, but a
		// homogeneous fleet sends the same list from every client, so it
		// is shared from the cache too, and the engine resolves a shared
		// list to its slots once.
		dec = func(b []byte) error {
			if in != nil {
				if ok, err := unmarshalCompact(b, r, in, c.delta.names); ok {
					return err
				}
			}
			return unmarshalDelta(b, r, c.delta.names)
		}
	default:
		return c.base.Unmarshal(data, v)
	}
	if len(data) == 1 {
		return dec(data[0].ReadOnlyData())
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return dec(buf.ReadOnlyData())
}

// unmarshalDelta is unmarshalNames for a delta request.
func unmarshalDelta(b []byte, r *discoveryv3.DeltaDiscoveryRequest, decode func(raw []byte, count int) ([]string, error)) error {
	names, err := unmarshalNames(b, r, decode)
	if names != nil {
		r.ResourceNamesSubscribe = names
	}
	return err
}

// unmarshalNames decodes b into m, except the records of field 3 (the
// resource names), which it returns decoded by names when they are
// contiguous (every encoder writes fields in order); the rest goes through
// proto.Unmarshal in two pieces around them. It returns nil names when m
// got them from proto.Unmarshal (none, or not contiguous).
func unmarshalNames(b []byte, m proto.Message, names func(raw []byte, count int) ([]string, error)) ([]string, error) {
	what := m.ProtoReflect().Descriptor().Name()
	start, end, count, err := recordsSpan(b, fieldResourceNames)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", what, err)
	}
	if start < 0 {
		return nil, proto.Unmarshal(b, m)
	}
	if err := proto.Unmarshal(b[:start], m); err != nil {
		return nil, err
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(b[end:], m); err != nil {
		return nil, err
	}
	list, err := names(b[start:end], count)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", what, err)
	}
	return slices.Clip(list), nil // an append must copy
}

// recordsSpan finds the contiguous run of records of field (a
// length-delimited field under 16: resource_names, initial versions).
// start is -1 if there is none or if the records are interleaved with
// other fields.
func recordsSpan(b []byte, field protowire.Number) (start, end, count int, err error) {
	tag := byte(field<<3) | byte(protowire.BytesType)
	start, end = -1, -1
	for off := 0; off < len(b); {
		if b[off] == tag && (start < 0 || end == off) {
			// The common case, thousands of times per request: a short
			// name in one record, skipped without the generic decoder.
			l, n := protowire.ConsumeVarint(b[off+1:])
			if n < 0 || l > uint64(len(b)-off-1-n) {
				return -1, -1, 0, errors.New("truncated record")
			}
			if start < 0 {
				start = off
			}
			off += 1 + n + int(l)
			end = off
			count++
			continue
		}
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return -1, -1, 0, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if m < 0 {
			return -1, -1, 0, protowire.ParseError(m)
		}
		if num == field {
			if typ != protowire.BytesType {
				// proto keeps such a record as an unknown field; so
				// does the generic decoder this falls back to.
				return -1, -1, 0, nil
			}
			switch {
			case start < 0:
				start = off
			case end != off:
				return -1, -1, 0, nil // interleaved: let proto decode it all
			}
			end = off + n + m
			count++
		}
		off += n + m
	}
	return start, end, count, nil
}

// names decodes the resource_names records in raw, from the cache when the
// same list was seen before.
func (c *namesCache) names(raw []byte, count int) ([]string, error) {
	if count < minCachedNames {
		return decodeNames(raw, count)
	}
	h := xxhash.Sum64(raw)
	c.mu.Lock()
	e := c.m[h]
	c.mu.Unlock()
	if e != nil && bytes.Equal(e.raw, raw) {
		return e.names, nil
	}
	names, err := decodeNames(raw, count)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[h]; !ok {
		if len(c.seen) >= maxSeenLists || c.seen == nil {
			c.seen = make(map[uint64]struct{}) // a fresh map: an emptied one keeps its size
		}
		c.seen[h] = struct{}{}
		return names, nil
	}
	delete(c.seen, h)
	e = &namesEntry{raw: bytes.Clone(raw), names: names}
	if len(c.m) >= maxCacheEntries || c.bytes+len(raw) > maxCacheBytes {
		for k, old := range c.m { // evict an arbitrary entry
			delete(c.m, k)
			c.bytes -= len(old.raw)
			sharedLists.Delete(&old.names[0])
			break
		}
	}
	if len(raw) <= maxCacheBytes/4 {
		if old := c.m[h]; old != nil {
			c.bytes -= len(old.raw)
			sharedLists.Delete(&old.names[0])
		}
		c.m[h] = e
		c.bytes += len(raw)
		sharedLists.Store(&names[0], struct{}{})
	}
	return names, nil
}

// sharedLists holds &names[0] of every list the codecs hand out to several
// requests. Such a list is immutable, so a watch that got the same list
// last time knows its subscription is unchanged without hashing all its
// names, and the engine looks up its slots once. An evicted list leaves the map; a watch that still
// references it compares by identity only, which stays correct.
var sharedLists sync.Map

// IsShared reports whether names is a list handed out by a codec cache.
func IsShared(names []string) bool {
	if len(names) == 0 {
		return false
	}
	_, ok := sharedLists.Load(&names[0])
	return ok
}

// Share marks names, not empty, as a list handed out to several
// requests until unshare is called: what the codec's cache does for the
// lists it keeps. Tests of the engine use it to stand for a fleet's
// identical lists.
func Share(names []string) (unshare func()) {
	sharedLists.Store(&names[0], struct{}{})
	return func() { sharedLists.Delete(&names[0]) }
}

// decodeNames converts the records with a single string allocation: the
// names are substrings of one copy of raw. They are validated as UTF-8, as
// proto3 requires of strings.
func decodeNames(raw []byte, count int) ([]string, error) {
	all := string(raw)
	names := make([]string, 0, count)
	for off := 0; off < len(all); {
		_, _, n := protowire.ConsumeTag(raw[off:])
		v, m := protowire.ConsumeBytes(raw[off+n:])
		if n < 0 || m < 0 {
			return nil, fmt.Errorf("resource_names: %w", protowire.ParseError(min(n, m)))
		}
		at := off + n + m - len(v)
		name := all[at : at+len(v)]
		if !utf8.ValidString(name) {
			return nil, fmt.Errorf("resource_names: invalid UTF-8")
		}
		names = append(names, name)
		off += n + m
	}
	return names, nil
}

// fieldInitialVersions is DeltaDiscoveryRequest.initial_resource_versions:
// a map<string, string>, on the wire one record per entry, each a message
// of key (field 1) and value (field 2).
const fieldInitialVersions = 5

const (
	tagEntryKey   = 1<<3 | byte(protowire.BytesType)
	tagEntryValue = 2<<3 | byte(protowire.BytesType)
)

// unmarshalCompact decodes b into r as unmarshalDelta does, except that
// the initial versions are left in in (in.initial, in.initialN) as their
// records. It returns false, having decoded nothing, when they are not in
// the simple form InitialVersions walks (contiguous records whose entries
// hold only a UTF-8 key and value): the caller then decodes b as usual,
// which also words any error.
func unmarshalCompact(b []byte, r *discoveryv3.DeltaDiscoveryRequest, in *Inbound, decode func(raw []byte, count int) ([]string, error)) (bool, error) {
	start, end, n, err := recordsSpan(b, fieldInitialVersions)
	if err != nil || start < 0 || !simpleEntries(b[start:end]) {
		return false, nil
	}
	if err := unmarshalDelta(b[:start], r, decode); err != nil {
		return true, err
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(b[end:], r); err != nil {
		return true, err
	}
	in.initial, in.initialN = string(b[start:end]), n
	return true, nil
}

// simpleEntries reports whether raw, records of initial versions, is in
// the form InitialVersions walks: each record's tag one byte, each entry
// only keys and values (one-byte tags), all valid UTF-8.
func simpleEntries(raw []byte) bool {
	tag := byte(fieldInitialVersions<<3) | byte(protowire.BytesType)
	for off := 0; off < len(raw); {
		if raw[off] != tag {
			return false
		}
		kv, n := protowire.ConsumeBytes(raw[off+1:])
		if n < 0 {
			return false
		}
		for i := 0; i < len(kv); {
			if t := kv[i]; t != tagEntryKey && t != tagEntryValue {
				return false
			}
			v, m := protowire.ConsumeBytes(kv[i+1:])
			if m < 0 || !utf8.Valid(v) {
				return false
			}
			i += 1 + m
		}
		off += 1 + n
	}
	return true
}

// InitialVersions are a delta request's initial_resource_versions: its map,
// or the records Codec kept (see above).
type InitialVersions struct {
	m   map[string]string
	raw string // records checked by simpleEntries
	n   int    // records in raw
}

// InitialOf returns req's initial versions: the records in kept when Codec
// decoded it, else the request's map.
func InitialOf(req *discoveryv3.DeltaDiscoveryRequest, in *Inbound) InitialVersions {
	if in != nil && in.initial != "" {
		return InitialVersions{raw: in.initial, n: in.initialN}
	}
	return InitialVersions{m: req.GetInitialResourceVersions()}
}

// Len is the number of entries (records when raw: a repeated name counts
// each time).
func (v InitialVersions) Len() int {
	if v.m != nil {
		return len(v.m)
	}
	return v.n
}

// All yields each name and version; from raw, substrings of it, in wire
// order, a repeated name as often as it comes (the last one counts, as in
// a map).
func (v InitialVersions) All() iter.Seq2[string, string] {
	if v.m != nil {
		return func(yield func(string, string) bool) {
			for k, ver := range v.m {
				if !yield(k, ver) {
					return
				}
			}
		}
	}
	return func(yield func(string, string) bool) {
		raw := v.raw
		for off := 0; off < len(raw); {
			l, n := uvarint(raw, off+1)
			kv, end := off+1+n, off+1+n+int(l)
			var key, ver string
			for i := kv; i < end; {
				vl, vn := uvarint(raw, i+1)
				s := raw[i+1+vn : i+1+vn+int(vl)]
				if raw[i] == tagEntryKey {
					key = s
				} else {
					ver = s
				}
				i += 1 + vn + int(vl)
			}
			if !yield(key, ver) {
				return
			}
			off = end
		}
	}
}

// Lookup returns the entries as a map, for looking names up: the map
// itself, or one built from raw whose strings share raw's bytes.
func (v InitialVersions) Lookup() map[string]string {
	if v.m != nil {
		return v.m
	}
	m := make(map[string]string, v.n)
	for k, ver := range v.All() {
		m[k] = ver //nolint:modernize // sized for the n entries up front, where maps.Collect grows the map as it goes
	}
	return m
}

// uvarint decodes the varint at s[i:], already checked well formed, and
// returns it with its length.
func uvarint(s string, i int) (uint64, int) {
	var v uint64
	for n := 0; ; n++ {
		b := s[i+n]
		v |= uint64(b&0x7f) << (7 * n)
		if b < 0x80 {
			return v, n + 1
		}
	}
}
