package scalar

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"text/template"
	"time"
)

func TestValues(t *testing.T) {
	tests := []struct {
		name string
		got  func() (any, error)
		want any    // when err is ""
		err  string // the whole message
	}{
		{"int", func() (any, error) { return Int(42, 0, 100) }, int64(42), ""},
		{"int from a string", func() (any, error) { return Int("-7", -10, 10) }, int64(-7), ""},
		{"int from a float", func() (any, error) { return Int(1e3, 0, 2000) }, int64(1000), ""},
		{"int min", func() (any, error) { return Int(int64(math.MinInt64), math.MinInt64, 0) }, int64(math.MinInt64), ""},
		{"int min from a string", func() (any, error) { return Int("-9223372036854775808", math.MinInt64, 0) }, int64(math.MinInt64), ""},
		{"int not whole", func() (any, error) { return Int("abc", 0, 1) }, nil, `"abc" is not a whole number`},
		{"int fraction", func() (any, error) { return Int(1.5, 0, 10) }, nil, `1.5 is not a whole number`},
		{"int range", func() (any, error) { return Int(5000000000, math.MinInt32, math.MaxInt32) }, nil, `5000000000 is out of range (-2147483648 to 2147483647)`},
		{"int huge string", func() (any, error) { return Int("99999999999999999999999", 0, 1) }, nil, `"99999999999999999999999" is out of range`},
		{"int from a bool", func() (any, error) { return Int(true, 0, 1) }, nil, `want a whole number, not true`},
		{"uint", func() (any, error) { return Uint(uint64(math.MaxUint64), math.MaxUint64) }, uint64(math.MaxUint64), ""},
		{"uint negative", func() (any, error) { return Uint(-1, math.MaxUint32) }, nil, `-1 is out of range (0 to 4294967295)`},
		{"uint minus zero", func() (any, error) { return Uint("-0", 5) }, uint64(0), ""},
		{"float", func() (any, error) { return Float("0.25") }, 0.25, ""},
		{"float from an int", func() (any, error) { return Float(-3) }, -3.0, ""},
		{"float not a number", func() (any, error) { return Float("NaN") }, nil, `"NaN" is not a number`},
		{"float from a list", func() (any, error) { return Float([]any{1}) }, nil, `want a number, not the list [1]`},
		{"bool", func() (any, error) { return Bool("false") }, false, ""},
		{"bool yes", func() (any, error) { return Bool("yes") }, nil, `"yes" is not true or false`},
		{"bool from a number", func() (any, error) { return Bool(1) }, nil, `want true or false, not 1`},
		{"duration", func() (any, error) { return Duration("1h30m") }, 90 * time.Minute, ""},
		{"duration zero", func() (any, error) { return Duration(0) }, time.Duration(0), ""},
		{"duration zero string", func() (any, error) { return Duration("0") }, time.Duration(0), ""},
		{"duration as is", func() (any, error) { return Duration(time.Second) }, time.Second, ""},
		{"duration bare number", func() (any, error) { return Duration(100) }, nil, `100 is not a duration: durations need a unit such as 100ms or 30s`},
		{"duration bare number string", func() (any, error) { return Duration("100") }, nil, `"100" is not a duration: durations need a unit such as 100ms or 30s`},
		{"duration unknown unit", func() (any, error) { return Duration("10 seconds") }, nil, `"10 seconds" is not a duration: durations need a unit such as 100ms or 30s`},
		{"duration from a map", func() (any, error) { return Duration(map[string]any{"s": 1}) }, nil, `{s: 1} is not a duration: durations need a unit such as 100ms or 30s`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v, want %v", err, tc.want)
			case tc.err == "" && got != tc.want:
				t.Fatalf("got %#v, want %#v", got, tc.want)
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestShow(t *testing.T) {
	long := make([]any, 40)
	for i := range long {
		long[i] = i
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{"web", `"web"`},
		{[]any{"web", "a b", 1, true, nil}, `[web, "a b", 1, true, null]`},
		{map[string]any{"b": []any{}, "a": map[string]any{"x": ""}}, `{a: {x: ""}, b: []}`},
		{long, "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1..."},
	} {
		if got := Show(tc.v); got != tc.want {
			t.Errorf("Show(%v) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

func TestTemplateError(t *testing.T) {
	data := struct{ Name, Source string }{"web", "static"}
	exec := func(text string) error {
		tpl, err := template.New("x").Parse(text)
		if err != nil {
			return err
		}
		return tpl.Execute(new(nopWriter), data)
	}
	for text, want := range map[string]string{
		"{{.Nam}}":           "unknown field .Nam (want .Name or .Source)",
		"{{.Name":            "unclosed action",
		"{{nope}}":           `function "nope" not defined`,
		"{{index .Name 10}}": "error calling index: index out of range: 10",
	} {
		err := exec(text)
		if err == nil {
			t.Fatalf("%s: no error", text)
		}
		if got := TemplateError(err, data).Error(); got != want {
			t.Errorf("%s: %s, want %s", text, got, want)
		}
	}
	if got := TemplateError(fmt.Errorf("rendering: %w", errors.New("empty")), data).Error(); got != "rendering: empty" {
		t.Errorf("another error: %s", got)
	}
}

type nopWriter struct{}

func (*nopWriter) Write(p []byte) (int, error) { return len(p), nil }
