package file

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

// itemCache parses a YAML services file one list item at a time and reuses
// the services of items whose text did not change since the last parse.
//
// A one-line edit of a file of 1,000 services used to re-parse the whole
// file (yaml.v3 builds a node per scalar: ~1.7 s of CPU per edit at 1,000
// services × 10 endpoints on the shared 2-CPU machine, ~13 s at 10,000).
// Files written by tools are a `services:` key followed by one block item
// per service; such a file is split into items by their indentation alone,
// and only new or edited items go through the parser. Anything else (JSON,
// anchors and aliases, tags, block scalars, documents markers, tabs,
// another top-level key, an item that does not parse alone) takes the
// whole-file Parse, which also produces every error message, so the result
// and the errors are the same as Parse's in every case.
type itemCache struct {
	byText map[string]sources.Service // the items of the last parse
}

// parse returns what Parse(data, isJSON) returns.
func (c *itemCache) parse(data []byte, isJSON bool) ([]sources.Service, error) {
	items, ok := splitItems(data)
	if isJSON || !ok {
		c.byText = nil
		return Parse(data, isJSON)
	}
	next := make(map[string]sources.Service, len(items))
	svcs := make([]sources.Service, 0, len(items))
	index := make(map[string]int, len(items))
	for i, item := range items {
		s, hit := c.byText[string(item)]
		if !hit {
			one, err := Parse(append([]byte("services:\n"), item...), false)
			if err != nil || len(one) != 1 {
				c.byText = nil
				return Parse(data, false) // its error names the right item and line
			}
			s = one[0]
		}
		if _, dup := index[s.Name]; dup {
			c.byText = nil
			return Parse(data, false)
		}
		index[s.Name] = i
		next[string(item)] = s
		svcs = append(svcs, placed(s, i))
	}
	c.byText = next
	return svcs, nil
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

// splitItems returns the text of each item of a file made of a top-level
// `services:` line and block list items under it, or false if the file has
// any other shape or uses YAML features that reach across items.
func splitItems(data []byte) ([][]byte, bool) {
	if bytes.ContainsAny(data, "&*!|>%\t") || bytes.Contains(data, []byte("---")) || bytes.Contains(data, []byte("...")) {
		return nil, false
	}
	var (
		items  [][]byte
		indent []byte // of the items' "- "
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
		trimmed := bytes.TrimLeft(line, " ")
		switch {
		case len(bytes.TrimSpace(line)) == 0 || trimmed[0] == '#':
			// blank or comment: part of whatever surrounds it
		case !seen:
			if !bytes.Equal(bytes.TrimRight(line, " \r\n"), []byte("services:")) {
				return nil, false
			}
			seen = true
		case indent == nil:
			if !bytes.HasPrefix(trimmed, []byte("- ")) || len(trimmed) == len(line) {
				return nil, false
			}
			indent = line[:len(line)-len(trimmed)]
			start = off
		case bytes.HasPrefix(line, indent) && bytes.HasPrefix(line[len(indent):], []byte("- ")):
			items = append(items, data[start:off])
			start = off
		case !bytes.HasPrefix(line, append(slices.Clip(indent), ' ')):
			return nil, false // less indented: not inside the list
		}
		off = end
	}
	if start < 0 {
		return nil, false
	}
	items = append(items, data[start:])
	for i, it := range items {
		if len(it) > 0 && it[len(it)-1] != '\n' {
			items[i] = append(slices.Clip(it), '\n')
		}
	}
	return items, true
}
