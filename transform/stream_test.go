package transform

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
)

// renameTo renames the services in its map; a target "" drops the service.
type renameTo map[string]string

func (r renameTo) Service(svc sources.Service) (sources.Service, bool) {
	to, ok := r[svc.Name]
	if !ok {
		return svc, true
	}
	if to == "" {
		return svc, false
	}
	svc.Name = to
	return svc, true
}

func changes(c manager.Changes) string {
	var parts []string
	for _, s := range c.Upserted {
		parts = append(parts, "+"+s.Name)
	}
	for _, n := range c.Removed {
		parts = append(parts, "-"+n)
	}
	return strings.Join(parts, " ")
}

func up(names ...string) manager.Changes {
	var c manager.Changes
	for _, n := range names {
		c.Upserted = append(c.Upserted, sources.Service{Name: n})
	}
	return c
}

func TestStream(t *testing.T) {
	// a -> x, b -> x (conflict), c dropped, d untouched.
	s := NewStream(&Chain{steps: []step{{name: "r", t: renameTo{"a": "x", "b": "x", "c": ""}}}})
	steps := []struct {
		in        manager.Changes
		want      string
		conflicts []string
	}{
		{in: up("a", "b", "c", "d"), want: "+d +x", conflicts: []string{"b"}},
		// b changes while a still publishes x: still blocked.
		{in: up("b"), want: "", conflicts: []string{"b"}},
		// a goes away: b takes x in the same change.
		{in: manager.Changes{Removed: []string{"a"}}, want: "+x"},
		// a comes back: b keeps x.
		{in: up("a"), want: "", conflicts: []string{"a"}},
		// Removing a dropped or blocked name removes nothing.
		{in: manager.Changes{Removed: []string{"c", "a"}}, want: ""},
		{in: manager.Changes{Removed: []string{"b", "d"}}, want: "-d -x"},
	}
	for i, st := range steps {
		got := s.Apply(st.in)
		if changes(got) != st.want || fmt.Sprint(s.Conflicts) != fmt.Sprint(st.conflicts) {
			t.Fatalf("step %d: got %q conflicts %v, want %q conflicts %v", i, changes(got), s.Conflicts, st.want, st.conflicts)
		}
	}
}

func TestStreamRenameMoves(t *testing.T) {
	// A service whose new version renders another name moves: the old name
	// is removed in the same change.
	target := renameTo{"a": "x"}
	s := NewStream(&Chain{steps: []step{{name: "r", t: target}}})
	s.Apply(up("a"))
	target["a"] = "y"
	if got := changes(s.Apply(up("a"))); got != "+y -x" {
		t.Fatalf("got %q, want +y -x", got)
	}
	target["a"] = ""
	if got := changes(s.Apply(up("a"))); got != "-y" {
		t.Fatalf("got %q after the service is dropped, want -y", got)
	}
}

func TestNoTransformsPassThrough(t *testing.T) {
	in := up("a")
	if got := NewStream(nil).Apply(in); changes(got) != "+a" {
		t.Fatalf("got %q", changes(got))
	}
}
