package file

import (
	"reflect"
	"strings"
	"testing"
)

// TestItemCacheMatchesParse checks that the item-wise parse returns what
// Parse returns, result or error, across a sequence of edits including
// shapes it must hand to Parse whole.
func TestItemCacheMatchesParse(t *testing.T) {
	base := string(servicesYAML(5))
	steps := []struct {
		name, data string
		itemwise   bool
	}{
		{"initial", base, true},
		{"one port edited", strings.Replace(base, "port: 8003,", "port: 9003,", 1), true},
		{"service added", base + "  - name: extra\n    endpoints: []\n", true},
		{"comment lines", "# generated\nservices:\n# first\n  - name: a\n    # inside\n    endpoints: [{address: 10.0.0.1, port: 80}]\n", true},
		{"duplicate across items", base + "  - name: svc-1\n    endpoints: []\n", true},
		{"bad item", strings.Replace(base, "port: 8003,", "port: 70000,", 1), true},
		{"anchor", "services:\n  - &s {name: a, endpoints: []}\n", false},
		{"other top-level key", base + "extra: 1\n", false},
		{"flow list", "services: [{name: a, endpoints: []}]\n", false},
		{"empty list", "services: []\n", false},
		{"empty file", "", false},
		{"back to the edit", strings.Replace(base, "port: 8003,", "port: 9003,", 1), true},
	}
	var c itemCache
	for _, st := range steps {
		if _, ok := splitItems([]byte(st.data)); ok != st.itemwise {
			t.Errorf("%s: split = %v, want %v", st.name, ok, st.itemwise)
		}
		want, wantErr := Parse([]byte(st.data), false)
		got, err := c.parse([]byte(st.data), false)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%s: error %v, Parse says %v", st.name, err, wantErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: services differ from Parse's:\n got %+v\nwant %+v", st.name, got, want)
		}
	}
}

// TestItemCacheReusesUnchanged checks that an edit re-parses only the
// edited item: the other services come from the cache.
func TestItemCacheReusesUnchanged(t *testing.T) {
	base := servicesYAML(50)
	var c itemCache
	if _, err := c.parse(base, false); err != nil {
		t.Fatal(err)
	}
	before := c.byText
	edited := []byte(strings.Replace(string(base), "port: 8003,", "port: 9003,", 1))
	if _, err := c.parse(edited, false); err != nil {
		t.Fatal(err)
	}
	items, _ := splitItems(edited)
	missed := 0
	for _, it := range items {
		if _, ok := before[string(it)]; !ok {
			missed++
		}
	}
	if missed != 1 {
		t.Errorf("%d items not in the cache after a one-line edit, want 1", missed)
	}
}
