package scalar

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// maxShown bounds how much of a value a message shows; a long list or map
// is cut with "...".
const maxShown = 60

// Show renders v as it would be written in YAML flow style, for messages:
// strings quoted, lists as [a, b], maps as {k: v} with sorted keys, cut
// after about 60 characters.
func Show(v any) string {
	var b strings.Builder
	show(&b, v, true)
	if b.Len() > maxShown {
		return b.String()[:maxShown] + "..."
	}
	return b.String()
}

// show writes v to b; top says whether v is the whole value (quoted when a
// string) or part of a list or map (bare, as YAML flow style has it).
func show(b *strings.Builder, v any, top bool) {
	if b.Len() > maxShown {
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		if top || x == "" || strings.ContainsAny(x, ",:[]{}\"' ") {
			b.WriteString(strconv.Quote(x))
		} else {
			b.WriteString(x)
		}
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			show(b, e, false)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				b.WriteString(", ")
			}
			show(b, k, false)
			b.WriteString(": ")
			show(b, x[k], false)
		}
		b.WriteByte('}')
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = e
		}
		show(b, m, top)
	default:
		fmt.Fprint(b, v)
	}
}
