package settings

import (
	"reflect"
	"regexp"
	"strings"
)

// Closest returns the candidate nearest to name by edit distance, the first
// in candidates' order among equals, and that distance; "" and -1 when
// there is no candidate.
func Closest(name string, candidates []string) (string, int) {
	best, bestDist := "", -1
	for _, c := range candidates {
		if d := editDistance(name, c); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, bestDist
}

// Suggest returns the candidate that a misspelled name most likely meant,
// or "" when none is close enough to be worth naming: at most a third of
// the name's letters (and at least one) may differ.
func Suggest(name string, candidates []string) string {
	best, d := Closest(strings.ToLower(name), candidates)
	if d < 0 || d > max(1, len(name)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b: the fewest
// single-byte insertions, deletions and substitutions turning one into
// the other.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// listIndex matches a list index in a key path, such as the [2] of
// rules[2].name.
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// keysBeside returns the keys that the struct holding key accepts, as
// their mapstructure tags name them: the known siblings of an unknown key.
// out is what Decode decodes into; nil when key does not lead through
// structs (a map's keys are free).
func keysBeside(out any, key string) []string {
	t := reflect.TypeOf(out)
	parts := strings.Split(listIndex.ReplaceAllString(key, ""), ".")
	for _, p := range parts[:len(parts)-1] {
		t = structOf(t)
		if t == nil {
			return nil
		}
		f, ok := fieldByTag(t, p)
		if !ok {
			return nil
		}
		t = f.Type
	}
	t = structOf(t)
	if t == nil {
		return nil
	}
	return tags(t)
}

// structOf returns the struct type t holds, through pointers, lists and
// arrays; nil if it holds none.
func structOf(t reflect.Type) reflect.Type {
	for t != nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			t = t.Elem()
		case reflect.Struct:
			return t
		default:
			return nil
		}
	}
	return nil
}

// fieldByTag returns the field of struct t that the key name decodes
// into, looking into squashed embedded structs.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		tag, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if strings.Contains(opts, "squash") {
			if sf, ok := fieldByTag(structOf(f.Type), name); ok {
				return sf, true
			}
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// tags returns the keys struct t accepts.
func tags(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		switch {
		case strings.Contains(opts, "squash"):
			if st := structOf(f.Type); st != nil {
				out = append(out, tags(st)...)
			}
		case tag == "-" || strings.Contains(opts, "remain") || !f.IsExported():
		case tag == "":
			out = append(out, strings.ToLower(f.Name))
		default:
			out = append(out, tag)
		}
	}
	return out
}
