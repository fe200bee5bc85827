package file

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

// servicesJSON is servicesYAML as JSON, one endpoint a line.
func servicesJSON(n int) []byte {
	var b strings.Builder
	b.WriteString("{\"services\": [\n")
	for i := range n {
		fmt.Fprintf(&b, "  {\"name\": \"svc-%d\", \"endpoints\": [\n", i)
		for j := range 10 {
			sep := ","
			if j == 9 {
				sep = ""
			}
			fmt.Fprintf(&b, "    {\"address\": \"10.%d.%d.%d\", \"port\": %d, \"weight\": 1, \"locality\": {\"region\": \"eu\", \"zone\": \"eu-1a\"}}%s\n", i>>8&255, i&255, j, 8000+j, sep)
		}
		sep := ","
		if i == n-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  ]}%s\n", sep)
	}
	b.WriteString("]}\n")
	return []byte(b.String())
}

// apply applies u to state, the services earlier updates add up to (nil
// before the first), as the manager would.
func apply(state map[string]sources.Service, u sources.Update) (map[string]sources.Service, error) {
	if state == nil && !u.Full {
		return nil, fmt.Errorf("first update is not Full: %+v", u)
	}
	if u.Full {
		state = map[string]sources.Service{}
	}
	for _, n := range u.Removed {
		delete(state, n)
	}
	for _, s := range u.Services {
		state[s.Name] = s
	}
	return state, nil
}

// follower applies the item cache's updates as the manager would.
type follower struct {
	c     itemCache
	state map[string]sources.Service
}

// load parses data and returns the services the updates so far add up to,
// in the order of want (Parse's order), and the update.
func (f *follower) load(data []byte, isJSON bool, want []sources.Service) ([]sources.Service, sources.Update, error) {
	u, _, err := f.c.parse(data, isJSON)
	if err != nil {
		return nil, u, err
	}
	if f.state, err = apply(f.state, u); err != nil {
		return nil, u, err
	}
	var got []sources.Service
	for _, s := range want {
		if g, ok := f.state[s.Name]; ok {
			got = append(got, g)
		}
	}
	if len(got) != len(f.state) {
		return nil, u, fmt.Errorf("state holds %q, Parse %d services", slices.Sorted(maps.Keys(f.state)), len(want))
	}
	return got, u, nil
}

// TestItemCacheMatchesParse checks that the updates of the item-wise parse
// add up to what Parse returns, result or error, across a sequence of
// edits including shapes it must hand to Parse whole. A service that only
// moved keeps its old origins: the manager compares services without them.
func TestItemCacheMatchesParse(t *testing.T) {
	yamlBase, jsonBase := string(servicesYAML(5)), string(servicesJSON(5))
	svc := func(name string) string {
		return "  - name: " + name + "\n    endpoints: [{address: 10.9.9.9, port: 80}]\n"
	}
	steps := []struct {
		name, data string
		json       bool
		itemwise   bool
	}{
		{"initial", yamlBase, false, true},
		{"one port edited", strings.Replace(yamlBase, "port: 8003,", "port: 9003,", 1), false, true},
		{"service added", yamlBase + svc("extra"), false, true},
		{"service inserted first", "services:\n" + svc("first") + strings.TrimPrefix(yamlBase, "services:\n") + svc("extra"), false, true},
		{"two removed", yamlBase, false, true},
		{"service renamed", strings.Replace(yamlBase, "svc-2\n", "svc-x\n", 1), false, true},
		{"services swapped", strings.Replace(strings.Replace(yamlBase, "svc-2\n", "svc-T\n", 1), "svc-3\n", "svc-2\n", 1), false, true},
		{"comment lines", "# generated\nservices:\n# first\n  - name: a\n    # inside\n    endpoints: [{address: 10.0.0.1, port: 80}]\n", false, true},
		{"duplicate across items", yamlBase + "  - name: svc-1\n    endpoints: []\n", false, true},
		{"duplicate moved into place", strings.Replace(yamlBase, "svc-4\n", "svc-0\n", 1), false, true},
		{"bad item", strings.Replace(yamlBase, "port: 8003,", "port: 70000,", 1), false, true},
		{"fixed after the error", yamlBase, false, true},
		{"anchor", "services:\n  - &s {name: a, endpoints: []}\n", false, false},
		{"other top-level key", yamlBase + "extra: 1\n", false, false},
		{"flow list", "services: [{name: a, endpoints: []}]\n", false, false},
		{"empty list", "services: []\n", false, false},
		{"empty file", "", false, false},
		{"back to the edit", strings.Replace(yamlBase, "port: 8003,", "port: 9003,", 1), false, true},
		{"json", jsonBase, true, true},
		{"json edited", strings.Replace(jsonBase, `"port": 8003,`, `"port": 9003,`, 1), true, true},
		{"json with a brace in a string", strings.Replace(jsonBase, `"svc-1"`, `"svc-{\"1]"`, 1), true, true},
		{"json duplicate", strings.Replace(jsonBase, `"svc-1"`, `"svc-0"`, 1), true, true},
		{"json bad item", strings.Replace(jsonBase, `"port": 8003,`, `"port": 70000,`, 1), true, true},
		{"json unknown field", strings.Replace(jsonBase, `"weight": 1,`, `"wait": 1,`, 1), true, true},
		{"json other key", strings.Replace(jsonBase, "\n]}\n", "\n], \"x\": 1}\n", 1), true, false},
		{"json trailing data", jsonBase + "{}", true, false},
		{"json empty list", `{"services": []}`, true, false},
		{"json back", jsonBase, true, true},
	}
	var f follower
	for _, st := range steps {
		split := splitYAML
		if st.json {
			split = splitJSON
		}
		if _, ok := split([]byte(st.data)); ok != st.itemwise {
			t.Errorf("%s: split = %v, want %v", st.name, ok, st.itemwise)
		}
		want, wantErr := Parse([]byte(st.data), st.json)
		got, _, err := f.load([]byte(st.data), st.json, want)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%s: error %v, Parse says %v", st.name, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d services, Parse %d", st.name, len(got), len(want))
			continue
		}
		for i := range want {
			if !got[i].Equal(want[i]) {
				t.Errorf("%s: service %d differs from Parse's:\n got %+v\nwant %+v", st.name, i, got[i], want[i])
			}
		}
	}
}

// TestItemCacheFullOrigins checks that a Full update is exactly Parse's,
// origins included.
func TestItemCacheFullOrigins(t *testing.T) {
	for _, isJSON := range []bool{false, true} {
		data := servicesYAML(20)
		if isJSON {
			data = servicesJSON(20)
		}
		var c itemCache
		u, _, err := c.parse(data, isJSON)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Parse(data, isJSON)
		if !u.Full || !reflect.DeepEqual(u.Services, want) {
			t.Errorf("json %v: first update differs from Parse's", isJSON)
		}
	}
}

// TestItemCacheSendsOnlyTheEdit checks that an edit is sent alone, with
// the origins of its place in the file, and that an insertion sends the
// inserted service and not the ones it moved.
func TestItemCacheSendsOnlyTheEdit(t *testing.T) {
	for _, isJSON := range []bool{false, true} {
		data, edited := servicesYAML(50), []byte(nil)
		if isJSON {
			data = servicesJSON(50)
			edited = []byte(strings.Replace(string(data), `"port": 8003,`, `"port": 9003,`, 1))
		} else {
			edited = []byte(strings.Replace(string(data), "port: 8003,", "port: 9003,", 1))
		}
		var c itemCache
		if _, _, err := c.parse(data, isJSON); err != nil {
			t.Fatal(err)
		}
		u, _, err := c.parse(edited, isJSON)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Parse(edited, isJSON)
		if u.Full || len(u.Removed) != 0 || len(u.Services) != 1 || !reflect.DeepEqual(u.Services[0], want[0]) {
			t.Errorf("json %v: edit sent %+v, want only %+v", isJSON, u, want[0])
		}
	}
	var c itemCache
	data := servicesYAML(50)
	if _, _, err := c.parse(data, false); err != nil {
		t.Fatal(err)
	}
	in := strings.Replace(string(data), "  - name: svc-10\n", "  - name: new\n    endpoints: []\n  - name: svc-10\n", 1)
	u, _, err := c.parse([]byte(in), false)
	if err != nil {
		t.Fatal(err)
	}
	if u.Full || len(u.Removed) != 0 || len(u.Services) != 1 || u.Services[0].Name != "new" {
		t.Errorf("insertion sent %+v, want only the new service", u)
	}
}

// TestItemCacheRandomEdits applies random edits (a line changed, a
// service inserted or deleted, a comment, a broken line, the head
// changed) and checks after each that the updates add up to Parse's
// services, or that the error is Parse's.
func TestItemCacheRandomEdits(t *testing.T) {
	for _, isJSON := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(1, 2))
		var f follower
		names := []string{}
		for i := range 30 {
			names = append(names, fmt.Sprintf("svc-%d", i))
		}
		port := map[string]int{}
		render := func() []byte {
			var b strings.Builder
			if isJSON {
				b.WriteString("{\"services\": [\n")
			} else {
				b.WriteString("services:\n")
			}
			for i, n := range names {
				if isJSON {
					sep := ","
					if i == len(names)-1 {
						sep = ""
					}
					fmt.Fprintf(&b, "  {\"name\": %q, \"endpoints\": [{\"address\": \"10.0.0.%d\", \"port\": %d}]}%s\n", n, i%250+1, 8000+port[n], sep)
				} else {
					fmt.Fprintf(&b, "  - name: %s\n    endpoints:\n      - {address: 10.0.0.%d, port: %d}\n", n, i%250+1, 8000+port[n])
				}
			}
			if isJSON {
				b.WriteString("]}\n")
			}
			return []byte(b.String())
		}
		for step := range 400 {
			switch rng.IntN(6) {
			case 0, 1:
				port[names[rng.IntN(len(names))]]++
			case 2:
				i := rng.IntN(len(names) + 1)
				names = slices.Insert(names, i, fmt.Sprintf("new-%d", step))
			case 3:
				if len(names) > 1 {
					i := rng.IntN(len(names))
					names = slices.Delete(names, i, i+1)
				}
			case 4:
				i, j := rng.IntN(len(names)), rng.IntN(len(names))
				names[i], names[j] = names[j], names[i]
			}
			data := render()
			switch rng.IntN(8) {
			case 0: // a broken or odd line somewhere
				lines := strings.SplitAfter(string(data), "\n")
				k := rng.IntN(len(lines))
				lines[k] = []string{"  # comment\n", "oops\n", "    - {address: 10.9.9.9, port: 1}\n", "\n", "  - name: svc-0\n"}[rng.IntN(5)] + lines[k]
				data = []byte(strings.Join(lines, ""))
			case 1: // the head
				data = append([]byte("# head\n"), data...)
			}
			want, wantErr := Parse(data, isJSON)
			got, _, err := f.load(data, isJSON, want)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("json %v step %d: error %v, Parse says %v\n%s", isJSON, step, err, wantErr, data)
			}
			if err != nil {
				continue
			}
			for i := range want {
				if !got[i].Equal(want[i]) {
					t.Fatalf("json %v step %d: service %d = %+v, Parse says %+v", isJSON, step, i, got[i], want[i])
				}
			}
		}
	}
}

// TestItemCacheUnchanged checks that the same file again is an empty
// partial update: the source relies on it instead of comparing itself.
func TestItemCacheUnchanged(t *testing.T) {
	for _, isJSON := range []bool{false, true} {
		data := servicesYAML(20)
		if isJSON {
			data = servicesJSON(20)
		}
		var c itemCache
		if _, _, err := c.parse(data, isJSON); err != nil || !c.holds() {
			t.Fatalf("json %v: first parse: %v, holds %v", isJSON, err, c.holds())
		}
		u, _, err := c.parse(slices.Clone(data), isJSON)
		if err != nil || u.Full || len(u.Services) != 0 || len(u.Removed) != 0 {
			t.Errorf("json %v: same file again sent %+v, %v", isJSON, u, err)
		}
	}
}
