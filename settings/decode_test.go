package settings

import (
	"testing"
	"time"
)

// TestDecodeMessages checks what Decode says of each kind of mistake, and
// that what weak typing rightly allows (strings from the environment, a
// single value for a list) still decodes.
func TestDecodeMessages(t *testing.T) {
	type entry struct {
		Name string `mapstructure:"name"`
	}
	type target struct {
		Small   int8              `mapstructure:"small"`
		Count   uint32            `mapstructure:"count"`
		Ratio   float64           `mapstructure:"ratio"`
		On      bool              `mapstructure:"on"`
		Wait    time.Duration     `mapstructure:"wait"`
		Grace   *time.Duration    `mapstructure:"grace"`
		Label   string            `mapstructure:"label"`
		Tags    []string          `mapstructure:"tags"`
		Entries []entry           `mapstructure:"entries"`
		Meta    map[string]string `mapstructure:"meta"`
		Sub     entry             `mapstructure:"sub"`
	}
	tests := []struct {
		name string
		in   map[string]any
		want string // the error, or "" for none
	}{
		{"environment strings", map[string]any{"small": "-8", "count": "7", "ratio": "0.5", "on": "true", "wait": "2s", "tags": "a,b"}, ""},
		{"a single value for a list", map[string]any{"tags": "a"}, ""},
		{"zero duration", map[string]any{"wait": 0, "grace": 0}, ""},
		{"overflow", map[string]any{"small": 200}, "small: 200 is out of range (-128 to 127)"},
		{"negative unsigned", map[string]any{"count": -1}, "count: -1 is out of range (0 to 4294967295)"},
		{"bool for a number", map[string]any{"count": true}, "count: want a whole number, not true"},
		{"number for a bool", map[string]any{"on": 1}, "on: want true or false, not 1"},
		{"bare duration", map[string]any{"wait": 5}, "wait: 5 is not a duration: durations need a unit such as 100ms or 30s"},
		{"bare duration behind a pointer", map[string]any{"grace": 5}, "grace: 5 is not a duration: durations need a unit such as 100ms or 30s"},
		{"list for a string", map[string]any{"label": []any{"a"}}, "label: want a string, not the list [a]"},
		{"scalar for a list of maps", map[string]any{"entries": "x"}, `entries: want a list, not "x"`},
		{"map for a list", map[string]any{"tags": map[string]any{"a": 1}}, "tags: want a list, not the map {a: 1}"},
		{"list for a struct", map[string]any{"sub": []any{"x"}}, "sub: want a map with keys name, not the list [x]"},
		{"list in a map", map[string]any{"meta": map[string]any{"k": []any{1}}}, "meta.k: want a string, not the list [1]"},
		{"unknown key", map[string]any{"nmae": 1}, "nmae: unknown key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out target
			err := Decode(tc.in, &out)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	var out target
	if err := Decode(map[string]any{"label": true, "tags": "a,b"}, &out); err != nil || out.Label != "true" || len(out.Tags) != 2 {
		t.Errorf("label %q, tags %q, error %v; want \"true\", [a b]", out.Label, out.Tags, err)
	}
}
