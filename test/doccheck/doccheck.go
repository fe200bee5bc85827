// Package doccheck holds the documentation to the code it describes. The
// configuration reference, docs/configuration.md, is a set of Markdown
// tables whose first column is a key and whose second is its default;
// Keys and Defaults read the same keys and defaults from a decoder's
// struct (its mapstructure tags and a value holding the defaults), so a
// test can require that both say the same thing: a key added to the
// decoder without a row fails, and so does a row for a key the decoder
// does not know, or a default that is not the code's.
//
// The reference's sections are named by its headings: a heading that
// contains "`type: NAME`" opens the keys of that source type, relative to
// its `sources` entry; a heading that names selectors opens the keys of a
// selector (sources.Selector), which every section shows as a single key;
// any other heading opens the bridge's own keys, written in full
// (`xds.keepalive.time`, `sources[].startup.timeout`).
package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Section names of the reference besides the source types.
const (
	Bridge   = "bridge"
	Selector = "selector"
)

// ReferencePath is the configuration reference, relative to the
// repository's root.
const ReferencePath = "docs/configuration.md"

// Reference is the configuration reference as read: per section, each
// documented key's default cell.
type Reference map[string]map[string]string

var (
	typeHeading = regexp.MustCompile("`type: ([a-z0-9_-]+)`")
	codeSpan    = regexp.MustCompile("`([^`]*)`")
)

// Root returns the repository's root: the nearest directory above the
// working directory holding go.mod with this module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/xdsbridge/xdsbridge\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/xdsbridge/xdsbridge above the working directory")
		}
		dir = parent
	}
}

// Load reads the reference of the repository at root.
func Load(root string) (Reference, error) {
	data, err := os.ReadFile(filepath.Join(root, ReferencePath))
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse reads the key tables of a reference: the tables whose header's
// first cell is "Key". A key documented twice in one section is an
// error.
func Parse(doc []byte) (Reference, error) {
	ref := Reference{}
	section, inKeys, fenced := Bridge, false, false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		switch {
		case fenced:
		case strings.HasPrefix(line, "#"):
			section, inKeys = Bridge, false
			if m := typeHeading.FindStringSubmatch(line); m != nil {
				section = m[1]
			} else if strings.Contains(strings.ToLower(line), "selector") {
				section = Selector
			}
		case !strings.HasPrefix(line, "|"):
			inKeys = false
		default:
			cells := strings.Split(strings.Trim(line, "|"), "|")
			first := strings.TrimSpace(cells[0])
			switch {
			case first == "Key":
				inKeys = true
			case !inKeys || strings.Trim(first, "-: ") == "":
			default:
				m := codeSpan.FindStringSubmatch(first)
				if m == nil {
					return nil, fmt.Errorf("line %d: the key %q is not in backticks", n, first)
				}
				def := ""
				if len(cells) > 1 {
					def = strings.TrimSpace(cells[1])
				}
				keys := ref[section]
				if keys == nil {
					keys = map[string]string{}
					ref[section] = keys
				}
				if _, dup := keys[m[1]]; dup {
					return nil, fmt.Errorf("line %d: %s documented twice in section %s", n, m[1], section)
				}
				keys[m[1]] = def
			}
		}
	}
	return ref, sc.Err()
}

// Walker reads the keys of a decoder's struct from its mapstructure tags.
// A struct field is a group of keys (`tls.ca_file`), a list of structs a
// list of groups (`services[].path`), anything else one key. Expand names
// the types decoded later from keys that the struct holds raw
// (map[string]any, []map[string]any), by their key (`scopes`,
// `sources[]`); Leaves the struct types that are one key each.
type Walker struct {
	Expand map[string]reflect.Type
	Leaves []reflect.Type
}

var durationType = reflect.TypeFor[time.Duration]()

// Keys returns the keys of v (a struct, or a pointer to one) with their
// values in v, each once; keys without a value in v (a list's members)
// hold the invalid reflect.Value.
func (w Walker) Keys(v any) (map[string]reflect.Value, error) {
	out := map[string]reflect.Value{}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	err := w.walk(rv.Type(), rv, "", out)
	return out, err
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func (w Walker) walk(t reflect.Type, v reflect.Value, prefix string, out map[string]reflect.Value) error {
	raw := reflect.TypeFor[map[string]any]()
	switch {
	case t == raw && w.Expand[prefix] != nil:
		return w.walk(w.Expand[prefix], reflect.Value{}, prefix, out)
	case t.Kind() == reflect.Slice && t.Elem() == raw && w.Expand[prefix+"[]"] != nil:
		return w.walk(w.Expand[prefix+"[]"], reflect.Value{}, prefix+"[]", out)
	case t.Kind() == reflect.Struct && !slices.Contains(w.Leaves, t):
		for i := range t.NumField() {
			f := t.Field(i)
			tag, ok := f.Tag.Lookup("mapstructure")
			if !f.IsExported() && !f.Anonymous || tag == "-" {
				continue
			}
			if !ok {
				return fmt.Errorf("%s: field %s.%s has no mapstructure tag", prefix, t, f.Name)
			}
			name, opts, _ := strings.Cut(tag, ",")
			var fv reflect.Value
			if v.IsValid() {
				fv = v.Field(i)
			}
			key := join(prefix, name)
			if opts == "squash" {
				key = prefix
			}
			if err := w.walk(f.Type, fv, key, out); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct && !slices.Contains(w.Leaves, t.Elem()):
		return w.walk(t.Elem(), reflect.Value{}, prefix+"[]", out)
	default:
		if _, dup := out[prefix]; dup {
			return fmt.Errorf("key %s decoded twice", prefix)
		}
		out[prefix] = v
		return nil
	}
}

// Format returns a default as the reference writes it in its first code
// span: durations as Go writes them without trailing zero units (5m,
// 1h30m),
// lists in YAML's flow style ([cds, eds]), other values as fmt does.
func Format(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	switch {
	case v.Type() == durationType:
		s := v.Interface().(time.Duration).String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = Format(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case v.Kind() == reflect.Float32 || v.Kind() == reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default:
		return fmt.Sprint(v.Interface())
	}
}

// Check compares the keys of one section of the reference with the keys
// (and values, as defaults) that a Walker read, and returns one line per
// difference: a key without a row, a row without a key, a default in v
// that the row's first code span does not show. A zero value is not
// checked (the code cannot tell "no default" from a zero one); nor is a
// key in skip.
func Check(ref Reference, section string, keys map[string]reflect.Value, skip ...string) []string {
	var out []string
	doc := ref[section]
	for _, k := range sortedKeys(keys) {
		if slices.Contains(skip, k) {
			continue
		}
		v := keys[k]
		want := ""
		if v.IsValid() && !v.IsZero() {
			want = Format(v)
		}
		cell, ok := doc[k]
		switch {
		case !ok && want != "":
			out = append(out, fmt.Sprintf("%s: key %s (default `%s`) is not in %s", section, k, want, ReferencePath))
			continue
		case !ok:
			out = append(out, fmt.Sprintf("%s: key %s is not in %s", section, k, ReferencePath))
			continue
		case want == "":
			continue
		}
		m := codeSpan.FindStringSubmatch(cell)
		if m == nil || !sameDefault(m[1], want, v) {
			out = append(out, fmt.Sprintf("%s: %s documents the default of %s as %q, the code's is `%s`", section, ReferencePath, k, cell, want))
		}
	}
	for _, k := range sortedKeys(doc) {
		if _, ok := keys[k]; !ok && !slices.Contains(skip, k) {
			out = append(out, fmt.Sprintf("%s: %s documents %s, which the decoder does not know", section, ReferencePath, k))
		}
	}
	return out
}

// sameDefault reports whether the documented default doc means the value
// v, formatted as want.
func sameDefault(doc, want string, v reflect.Value) bool {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Type() == durationType {
		d, err := time.ParseDuration(doc)
		return err == nil && d == v.Interface().(time.Duration)
	}
	return doc == want
}

// CheckSource is the test of a source type's section: cfg is its
// configuration struct holding the defaults (a key left out keeps), and
// every key of it must be documented with that default, and nothing else.
func CheckSource(t testing.TB, typ string, cfg any) {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := Walker{}.Keys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref[typ]) == 0 {
		t.Fatalf("%s has no section for type %s (a heading with `type: %s`)", ReferencePath, typ, typ)
	}
	for _, line := range Check(ref, typ, keys) {
		t.Error(line)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
