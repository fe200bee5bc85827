package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// positions maps the key paths of a configuration file, lower-cased as
// viper reads them ("sources[0].type", "xds.listen"), to where each key (or
// list item) is written, so that an error names its line and column.
type positions map[string]position

type position struct{ line, column int }

// indexPositions reads where every key of data is written; nil when data
// is not YAML (its syntax error has a line of its own).
func indexPositions(data []byte) positions {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	p := positions{}
	p.walk("", doc.Content[0])
	return p
}

func (p positions) walk(path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			key := strings.ToLower(k.Value)
			if path != "" {
				key = path + "." + key
			}
			p[key] = position{k.Line, k.Column}
			p.walk(key, n.Content[i+1])
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			key := fmt.Sprintf("%s[%d]", path, i)
			p[key] = position{item.Line, item.Column}
			p.walk(key, item)
		}
	case yaml.AliasNode:
		if n.Alias != nil {
			p.walk(path, n.Alias)
		}
	}
}

// lastStep matches the last step of a key path: ".name" or "[3]".
var lastStep = regexp.MustCompile(`(\.[^.\[]*|\[[0-9]+\])$`)

// of returns where key is written, or where its nearest written parent is
// (a required key that is missing is blamed on its parent).
func (p positions) of(key string) (position, bool) {
	for key = strings.ToLower(key); key != ""; {
		if pos, ok := p[key]; ok {
			return pos, true
		}
		next := lastStep.ReplaceAllString(key, "")
		if next == key {
			break
		}
		key = next
	}
	return position{}, false
}

// maxSyntaxScan bounds the lines syntaxError re-parses to find where a
// YAML mistake really is; a longer file keeps the parser's own line.
const maxSyntaxScan = 5000

// syntaxError words the YAML parser's error err about data, at the line of
// the mistake. The parser names the line where the construct it was in
// began (an indentation mistake on line 4 of a list that starts on line 1
// is reported at line 1), so the line here is the one after the longest
// prefix of data that still parses.
func syntaxError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	reported := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		reported, _ = strconv.Atoi(m[1])
		msg = strings.TrimPrefix(msg, m[0])
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	line := reported
	if len(lines) <= maxSyntaxScan {
		for k := range slices.Backward(lines) {
			var v any
			if yaml.Unmarshal(bytes.Join(lines[:k], nil), &v) == nil {
				line = max(line, k+1)
				break
			}
		}
	}
	if line > 0 && line <= len(lines) && bytes.ContainsRune(lines[line-1], '\t') && !strings.Contains(msg, "tab") {
		msg += " (a tab: YAML indents with spaces only)"
	}
	return &SyntaxError{Line: line, Err: errors.New(msg)}
}

// yamlLine matches the parser's "line N: " prefix.
var yamlLine = regexp.MustCompile(`^line ([0-9]+): `)

// SyntaxError is a configuration file that is not valid YAML, at Line (0
// when unknown).
type SyntaxError struct {
	Line int
	Err  error
}

func (e *SyntaxError) Error() string { return "not valid YAML: " + e.Err.Error() }
func (e *SyntaxError) Unwrap() error { return e.Err }
