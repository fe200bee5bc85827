package file

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/sources"
)

// itemCache parses a services file one list item at a time and, from the
// second load on, reports only the services of the items that changed.
//
// Parsing the whole file for a one-line edit costs a yaml.v3 node per scalar
// of every service, seconds of CPU for a large file (docs/benchmarks.md,
// "File source, end to end"). Files written by tools are a `services:` key
// followed by one block item per service, or a JSON object whose one key
// `services` holds a list of objects; such a file is split into items by a
// scan of its bytes, and only new or edited items go through the parser.
// Anything else (YAML anchors and aliases, tags, block scalars, document
// markers, tabs, another top-level key, an item that does not parse alone)
// takes the whole-file Parse, which also produces every error message, so
// the services and the errors are the same as Parse's in every case.
//
// Finding what changed must not cost a pass over every service either: in a
// large file a map keyed by every item's text, a copy of every service to
// renumber its origins, and a full update that the manager compares service
// by service cost more than the parse of the edited item. Items are compared
// with the last load's by position instead: the unchanged items before and
// after the edited stretch are skipped with a byte comparison, and the
// update names only the services of that stretch.
//
// Splitting the whole file again is itself a pass over every line, so the
// bytes the file shares with the last one at its start and at its end are
// found first (at the speed of memory) and only the items between them are
// split anew.
type itemCache struct {
	// schema reads what the split refuses, and a cache whose format is
	// FormatPrometheus never splits: target groups are parsed whole.
	schema Schema
	data   []byte              // the last file loaded item by item
	spans  []span              // where each of its items is
	svcs   []sources.Service   // each item's service, parsed alone (origins name services[0])
	names  map[string]struct{} // every service's name, to find duplicates
	peak   int                 // the most names held (reclaim.Map)
}

// holds reports whether the cache holds the last file loaded, so that
// parse finds an unchanged file by itself (an empty partial update).
func (c *itemCache) holds() bool { return c.names != nil }

// span is an item's place in its file: data[span[0]:span[1]].
type span [2]int

// parse returns the services of data as an update: a Full one with every
// service when nothing was cached (the first load, or after a file the
// split refused), else a partial one with the services of the items that
// changed and the names of those gone. Either applied to what the last
// update left gives what c.schema.Parse(data, isJSON) returns, whose
// dropped targets it returns too; an error is that Parse's, and leaves the
// cache as it was.
func (c *itemCache) parse(data []byte, isJSON bool) (sources.Update, Dropped, error) {
	if c.schema.format() == FormatPrometheus {
		return c.whole(data, isJSON)
	}
	// An item is parsed as the only item of a file of its own.
	wrap, tail := []byte("services:\n"), []byte("\n")
	if isJSON {
		wrap, tail = []byte(`{"services":[`), []byte("]}")
	}
	full := c.names == nil
	spans, p, s, ok := c.split(data, isJSON)
	if !ok {
		return c.whole(data, isJSON)
	}
	item := func(i int) []byte { return data[spans[i][0]:spans[i][1]] }
	cached := func(i int) []byte { return c.data[c.spans[i][0]:c.spans[i][1]] }
	oldMid := c.svcs[p : len(c.svcs)-s]
	byText := make(map[string]sources.Service, len(oldMid))
	gone := make(map[string]struct{}, len(oldMid))
	for i, svc := range oldMid {
		byText[string(cached(p+i))] = svc
		gone[svc.Name] = struct{}{}
	}
	mid := make([]sources.Service, 0, len(spans)-s-p)
	fresh := make([]bool, 0, cap(mid)) // parsed now, not found in the cache
	seen := make(map[string]struct{}, cap(mid))
	for i := p; i < len(spans)-s; i++ {
		svc, hit := byText[string(item(i))]
		fresh = append(fresh, !hit)
		if !hit {
			one, dropped, err := parseItem(slices.Concat(wrap, item(i), tail), isJSON)
			if err != nil || len(one) != 1 || len(dropped) > 0 {
				// The whole parse's error names the right item and line,
				// and its drops name the endpoints where they are.
				return c.whole(data, isJSON)
			}
			svc = one[0]
		}
		_, dup := seen[svc.Name]
		if _, kept := c.names[svc.Name]; kept {
			_, moved := gone[svc.Name]
			dup = dup || !moved
		}
		if dup {
			return c.whole(data, isJSON)
		}
		seen[svc.Name] = struct{}{}
		mid = append(mid, svc)
	}

	var u sources.Update
	if full {
		c.names, c.peak = seen, len(seen)
		u = sources.Update{Full: true, Services: make([]sources.Service, len(mid))}
		for i, svc := range mid {
			u.Services[i] = placed(svc, i)
		}
	} else {
		// A service whose text is the cached one is not sent, even when
		// it moved (items inserted or removed before it): its origins
		// name another index, but the receiver compares services without
		// their origins.
		for i, svc := range mid {
			if fresh[i] {
				u.Services = append(u.Services, placed(svc, p+i))
			}
		}
		for name := range gone {
			delete(c.names, name)
			if _, still := seen[name]; !still {
				u.Removed = append(u.Removed, name)
			}
		}
		for name := range seen {
			c.names[name] = struct{}{}
		}
		c.names = reclaim.Map(c.names, &c.peak)
		slices.Sort(u.Removed)
	}
	if len(spans) == len(c.spans) {
		copy(c.svcs[p:], mid)
	} else {
		c.svcs = slices.Concat(c.svcs[:p], mid, c.svcs[len(c.svcs)-s:])
	}
	c.data, c.spans = data, spans // the new text, so that the old file can be freed
	return u, nil, nil
}

// split returns the items of data, and how many at its start (p) and end
// (s) are the cached ones byte for byte; false if data cannot be split.
func (c *itemCache) split(data []byte, isJSON bool) (spans []span, p, s int, ok bool) {
	splitter := splitYAML
	if isJSON {
		splitter = splitJSON
	}
	if c.names != nil {
		if spans, p, s, ok := c.window(data, splitter, isJSON); ok {
			return spans, p, s, true
		}
	}
	if spans, ok = splitter(data); !ok || c.names == nil {
		return spans, 0, 0, ok
	}
	item := func(i int) []byte { return data[spans[i][0]:spans[i][1]] }
	cached := func(i int) []byte { return c.data[c.spans[i][0]:c.spans[i][1]] }
	for p < min(len(spans), len(c.spans)) && bytes.Equal(item(p), cached(p)) {
		p++
	}
	for s < min(len(spans), len(c.spans))-p && bytes.Equal(item(len(spans)-1-s), cached(len(c.spans)-1-s)) {
		s++
	}
	return spans, p, s, true
}

// window splits only the part of data that differs from the cached file:
// the items wholly inside the bytes both share at their start and at their
// end are the cached ones. It keeps one more item than needed on each
// side in the part it splits, because where an item ends is decided by
// the line after it (that item's text is found unchanged in the cache and
// not parsed). False when the part cannot be split alone; the caller then
// splits the whole file.
func (c *itemCache) window(data []byte, splitter func([]byte) ([]span, bool), isJSON bool) ([]span, int, int, bool) {
	old, spans, n := c.data, c.spans, len(c.spans)
	if n == 0 {
		return nil, 0, 0, false
	}
	pre := 0
	for pre < min(len(old), len(data)) {
		// bytes.Equal on blocks: memory speed, unlike a loop over bytes.
		k := min(1<<16, len(old)-pre, len(data)-pre)
		if !bytes.Equal(old[pre:pre+k], data[pre:pre+k]) {
			for old[pre] == data[pre] {
				pre++
			}
			break
		}
		pre += k
	}
	suf := 0
	for maxSuf := min(len(old), len(data)) - pre; suf < maxSuf; {
		k := min(1<<16, maxSuf-suf)
		o, d := old[len(old)-suf-k:len(old)-suf], data[len(data)-suf-k:len(data)-suf]
		if !bytes.Equal(o, d) {
			for o[len(o)-1] == d[len(d)-1] {
				o, d = o[:len(o)-1], d[:len(d)-1]
				suf++
			}
			break
		}
		suf += k
	}
	if pre < spans[0][0] {
		return nil, 0, 0, false // the head of the file changed
	}
	p := max(sort.Search(n, func(i int) bool { return spans[i][1] > pre })-1, 0)
	s := max(n-sort.Search(n, func(i int) bool { return spans[i][0] >= len(old)-suf })-1, 0)
	s = min(s, n-p)
	delta := len(data) - len(old)
	a, b := spans[p][0], len(data)
	if s > 0 {
		b = spans[n-s][0] + delta
	}
	if b < a {
		return nil, 0, 0, false
	}
	w := data[a:b]
	head, buf := []byte("services:\n"), []byte(nil)
	if isJSON {
		head = []byte(`{"services":[`)
		if s > 0 {
			// The part ends with the comma before the first kept item.
			w = bytes.TrimRight(w, " \t\r\n")
			if !bytes.HasSuffix(w, []byte(",")) {
				return nil, 0, 0, false
			}
			w = w[:len(w)-1]
			buf = slices.Concat(head, w, []byte("]}"))
		}
	}
	if buf == nil {
		buf = slices.Concat(head, w)
	}
	mid, ok := splitter(buf)
	if !ok {
		return nil, 0, 0, false
	}
	// A YAML part must be indented as the file's first item is.
	if indent := func(b []byte) int { return len(b) - len(bytes.TrimLeft(b, " ")) }; !isJSON &&
		indent(buf[mid[0][0]:]) != indent(old[spans[0][0]:]) {
		return nil, 0, 0, false
	}
	out := make([]span, 0, p+len(mid)+s)
	out = append(out, spans[:p]...)
	for _, m := range mid {
		out = append(out, span{m[0] - len(head) + a, m[1] - len(head) + a})
	}
	for _, sp := range spans[n-s:] {
		out = append(out, span{sp[0] + delta, sp[1] + delta})
	}
	return out, p, s, true
}

// whole parses data in one piece and empties the cache: the next load
// starts over from a Full update.
func (c *itemCache) whole(data []byte, isJSON bool) (sources.Update, Dropped, error) {
	doc, err := c.schema.Parse(data, isJSON)
	if err != nil {
		return sources.Update{}, nil, err
	}
	*c = itemCache{schema: c.schema}
	return sources.Update{Full: true, Services: doc.Services}, doc.Dropped, nil
}

// placed is a copy of s, parsed alone as services[0], as item i of the
// file: each endpoint's origin names its record by its place in the file.
// It is a copy because the cached service must stay as parsed.
func placed(s sources.Service, i int) sources.Service {
	s.Endpoints = slices.Clone(s.Endpoints)
	if i > 0 {
		prefix := fmt.Sprintf("services[%d]", i)
		for j := range s.Endpoints {
			if rest, ok := strings.CutPrefix(s.Endpoints[j].Origin.Record, "services[0]"); ok {
				s.Endpoints[j].Origin.Record = prefix + rest
			}
		}
	}
	return s
}

// splitYAML returns the text of each item of a file made of a top-level
// `services:` line and block list items under it, or false if the file has
// any other shape or uses YAML features that reach across items.
func splitYAML(data []byte) ([]span, bool) {
	// One IndexByte a character is several times faster than ContainsAny's
	// byte-by-byte set lookup over a large file.
	for _, c := range []byte("&*!|>%\t") {
		if bytes.IndexByte(data, c) >= 0 {
			return nil, false
		}
	}
	if bytes.Contains(data, []byte("---")) || bytes.Contains(data, []byte("...")) {
		return nil, false
	}
	var (
		items  []span
		indent []byte // of the items' "- "
		inside []byte // indent and one more space: a line of the current item
		seen   bool   // the services: line
		start  = -1   // of the current item
	)
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += off + 1
		}
		line := data[off:end]
		switch {
		case inside != nil && bytes.HasPrefix(line, inside):
			// the common case, first: a line of the current item
		case len(bytes.TrimSpace(line)) == 0 || bytes.TrimLeft(line, " ")[0] == '#':
			// blank or comment: part of whatever surrounds it
		case !seen:
			if !bytes.Equal(bytes.TrimRight(line, " \r\n"), []byte("services:")) {
				return nil, false
			}
			seen = true
		case indent == nil:
			trimmed := bytes.TrimLeft(line, " ")
			if !bytes.HasPrefix(trimmed, []byte("- ")) || len(trimmed) == len(line) {
				return nil, false
			}
			indent = line[:len(line)-len(trimmed)]
			inside = append(slices.Clip(indent), ' ')
			start = off
		case bytes.HasPrefix(line, indent) && bytes.HasPrefix(line[len(indent):], []byte("- ")):
			items = append(items, span{start, off})
			start = off
		default:
			return nil, false // less indented: not inside the list
		}
		off = end
	}
	if start < 0 {
		return nil, false
	}
	return append(items, span{start, len(data)}), true
}

// splitJSON returns the text of each object in the list of a file that is
// exactly `{"services": [ {...}, ... ]}` (any whitespace between tokens),
// or false for any other shape. It checks no more than that shape and the
// nesting of brackets outside strings: each item is parsed on its own.
func splitJSON(data []byte) ([]span, bool) {
	i := 0
	ws := func() {
		for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') {
			i++
		}
	}
	tok := func(t string) bool {
		ws()
		if !bytes.HasPrefix(data[i:], []byte(t)) {
			return false
		}
		i += len(t)
		return true
	}
	if !tok("{") || !tok(`"services"`) || !tok(":") || !tok("[") {
		return nil, false
	}
	var items []span
	for {
		ws()
		if i >= len(data) || data[i] != '{' {
			return nil, false // an empty list, or not an object: Parse words it
		}
		end, ok := objectEnd(data, i)
		if !ok {
			return nil, false
		}
		items = append(items, span{i, end})
		i = end
		if tok("]") {
			break
		}
		if !tok(",") {
			return nil, false
		}
	}
	if !tok("}") {
		return nil, false
	}
	ws()
	return items, i == len(data)
}

// objectEnd returns the index just past the object that starts at
// data[i], '{', counting brackets outside strings.
func objectEnd(data []byte, i int) (int, bool) {
	depth, str := 0, false
	for ; i < len(data); i++ {
		b := data[i]
		if str {
			switch b {
			case '\\':
				i++
			case '"':
				str = false
			}
			continue
		}
		switch b {
		case '"':
			str = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// parseItem parses a file of one item as Parse does, returning the
// endpoints it left out too.
func parseItem(data []byte, isJSON bool) ([]sources.Service, Dropped, error) {
	root, err := parseTree(data, isJSON)
	if err != nil {
		return nil, nil, err
	}
	return parseDocument(root)
}
