package statedir

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

// full sets every field of the model, so that a field the file does not
// store fails TestRoundTrip; TestFullSetsEveryField keeps it so as the
// model grows.
func full() sources.Service {
	loc := sources.Locality{Region: "eu-west", Zone: "eu-west-1a", SubZone: "rack-7"}
	return sources.Service{
		Name:   "web",
		Source: "consul",
		Endpoints: []sources.Endpoint{
			{Address: "10.0.0.1", Port: 8080, Weight: 2, Priority: 1, Health: sources.HealthDraining, Locality: loc,
				Metadata: map[string]string{"tags": "a,b", "version": "1"},
				Origin:   sources.Origin{Source: "consul", Record: "web-1 on node n1", Transforms: []string{"rename", "weights"}}},
			{Address: "2001:db8::2", Port: 8443, Health: sources.HealthHealthy},
		},
		Localities: []sources.LocalityWeight{{Priority: 1, Locality: loc, Weight: 3}},
	}
}

// stored is the state the tests save: every field of the model, a
// service without endpoints, empty and missing locality weights, and a
// source without services. Its services are not in name order.
func stored() map[string][]sources.Service {
	return map[string][]sources.Service{
		"consul": {
			full(),
			{Name: "empty", Endpoints: []sources.Endpoint{}},
			{Name: "api", Source: "consul", Endpoints: []sources.Endpoint{{Address: "10.0.0.2", Port: 80}},
				Localities: []sources.LocalityWeight{}},
		},
		"dns": {},
	}
}

// byName is state with each source's services sorted by name, as Load
// returns what Save wrote.
func byName(state map[string][]sources.Service) map[string][]sources.Service {
	out := maps.Clone(state)
	for name, svcs := range out {
		svcs = slices.Clone(svcs)
		slices.SortFunc(svcs, func(a, b sources.Service) int { return cmp.Compare(a.Name, b.Name) })
		out[name] = svcs
	}
	return out
}

// fps are the fingerprints of the sources of stored, as a configuration
// would give them.
var fps = map[string]string{
	"consul": Fingerprint("consul", "consul", map[string]any{"address": "127.0.0.1:8500"}),
	"dns":    Fingerprint("dns", "dns", map[string]any{"names": []any{"api.example.org"}}),
}

// unset lists the fields of v that are zero: every field of structs, the
// first element of slices, and maps and slices themselves when empty.
func unset(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, unset(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		return unset(v.Index(0), path+"[0]")
	case reflect.Map:
		if v.Len() == 0 {
			return []string{path}
		}
		return nil
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

func TestFullSetsEveryField(t *testing.T) {
	if missing := unset(reflect.ValueOf(full()), "Service"); len(missing) > 0 {
		t.Errorf("full() leaves %v unset: set them, so that TestRoundTrip proves the state file stores them", missing)
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := New(dir, fps, nil).Save(stored()); err != nil {
		t.Fatal(err)
	}
	got, err := New(dir, fps, nil).Load()
	if err != nil {
		t.Fatal(err)
	}
	if want := byName(stored()); !reflect.DeepEqual(got, want) {
		t.Errorf("loaded\n%+v\nwant what was saved\n%+v", got, want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".state-*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// formats are the files of every format Load reads, written by the
// version that wrote that format, and the state each holds. A new format
// adds its file here (TestGolden writes it), and the state of the format
// it replaces is then frozen as a literal, as format1State is.
var formats = map[string]map[string][]sources.Service{
	formatFile(format1): format1State,
	formatFile(Format):  byName(stored()),
}

// format1State is what testdata/format-1.json holds: stored() as the last
// version that wrote format 1 saved it, its services in the order given.
var format1State = map[string][]sources.Service{
	"consul": {
		{
			Name:   "web",
			Source: "consul",
			Endpoints: []sources.Endpoint{
				{Address: "10.0.0.1", Port: 8080, Weight: 2, Priority: 1, Health: sources.HealthDraining,
					Locality: sources.Locality{Region: "eu-west", Zone: "eu-west-1a", SubZone: "rack-7"},
					Metadata: map[string]string{"tags": "a,b", "version": "1"},
					Origin:   sources.Origin{Source: "consul", Record: "web-1 on node n1", Transforms: []string{"rename", "weights"}}},
				{Address: "2001:db8::2", Port: 8443, Health: sources.HealthHealthy},
			},
			Localities: []sources.LocalityWeight{{Priority: 1,
				Locality: sources.Locality{Region: "eu-west", Zone: "eu-west-1a", SubZone: "rack-7"}, Weight: 3}},
		},
		{Name: "empty", Endpoints: []sources.Endpoint{}},
		{Name: "api", Source: "consul", Endpoints: []sources.Endpoint{{Address: "10.0.0.2", Port: 80}},
			Localities: []sources.LocalityWeight{}},
	},
	"dns": {},
}

// TestGolden pins the encoding of the current format: a change to the
// records (a json tag, a field) or to how the model maps onto them fails
// here. Such a change is a new format, not an edit of this file: old
// files must stay readable as what they are (see formats).
func TestGolden(t *testing.T) {
	dir := t.TempDir()
	if err := New(dir, fps, nil).Save(stored()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", formatFile(Format))
	want, err := os.ReadFile(golden)
	if errors.Is(err, os.ErrNotExist) {
		// A new format: its first file is what it writes, to review.
		if err := os.WriteFile(golden, got, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("wrote %s for the new format %s: review it, add it to formats and commit it", golden, Format)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("format %s is no longer written as %s: a change to the file is a new Format, with a reader for this one.\ngot:\n%s\nwant:\n%s",
			Format, golden, indent(got), indent(want))
	}
}

// formatFile is the name of the testdata file of format.
func formatFile(format string) string {
	return "format-" + format[strings.LastIndex(format, "/")+1:] + ".json"
}

func indent(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

// TestReadsEveryFormat: a file of any format this version reads, written
// by the version that wrote that format, loads as the state it holds, so
// that an upgraded bridge keeps its warm start.
func TestReadsEveryFormat(t *testing.T) {
	for name, want := range formats {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			got, err := New(dir, fps, slog.New(slog.NewTextHandler(&logs, nil))).Load()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("loaded\n%+v\nwant\n%+v", got, want)
			}
			current := name == formatFile(Format)
			if earlier := strings.Contains(logs.String(), "earlier format"); earlier == current {
				t.Errorf("log %q: want a line about the earlier format exactly when it is one", logs.String())
			}
		})
	}
	if len(formats) != len(readers) {
		t.Errorf("%d format files for %d readers: each format read needs its file", len(formats), len(readers))
	}
}

// withChecksum is a file of format whose payload is payload, with a
// correct checksum: what a writer that made that payload would write.
func withChecksum(format, payload string) string {
	b, _ := json.Marshal(file{Format: format, Checksum: checksum([]byte(payload)), Sources: json.RawMessage(payload)})
	return string(b)
}

// TestLoadIgnoresUnreadable: a file that cannot be read as a whole is
// ignored whole, with an error that names it and says why, and no state
// at all; no file is no state and no error.
func TestLoadIgnoresUnreadable(t *testing.T) {
	svc := `{"name":"web","endpoints":[{"address":"10.0.0.1","port":80,"health":"healthy"}]}`
	src := func(name, svcs string) string {
		return `{"name":"` + name + `","fingerprint":"` + fps[name] + `","services":[` + svcs + `]}`
	}
	tests := []struct {
		name string
		edit func(saved string) string // the file's new content
		why  string                    // in the error
	}{
		{name: "empty", edit: func(string) string { return "" }, why: "truncated"},
		{name: "cut after a byte", edit: func(s string) string { return s[:1] }, why: "truncated"},
		{name: "cut in the payload", edit: func(s string) string { return s[:len(s)/2] }, why: "truncated"},
		{name: "cut before the end", edit: func(s string) string { return s[:len(s)-3] }, why: "truncated"},
		{name: "garbage", edit: func(string) string { return "\x00\x01" }, why: "corrupt"},
		{name: "trailing garbage", edit: func(s string) string { return s + "}" }, why: "corrupt"},
		{name: "not an object", edit: func(string) string { return `[1,2]` }, why: "corrupt"},
		{name: "no format", edit: func(string) string { return `{}` }, why: `format ""`},
		{name: "newer format", edit: func(s string) string { return strings.Replace(s, Format, "xdsbridge-state/9", 1) },
			why: `format "xdsbridge-state/9", which this version does not read`},
		{name: "altered", edit: func(s string) string { return strings.Replace(s, "8080", "8081", 1) }, why: "checksum mismatch"},
		{name: "unknown field", edit: func(string) string {
			return withChecksum(Format, `[{"name":"consul","fingerprint":"`+fps["consul"]+`","services":[{"name":"web","endpoints":[],"ttl":5}]}]`)
		}, why: `unknown field "ttl"`},
		{name: "a format 1 file relabelled", edit: func(string) string {
			b, err := os.ReadFile(filepath.Join("testdata", formatFile(format1)))
			if err != nil {
				t.Fatal(err)
			}
			return strings.Replace(string(b), format1, Format, 1)
		}, why: "corrupt"},
		{name: "wrong type", edit: func(string) string {
			return withChecksum(Format, `[`+src("consul", `{"name":"web","endpoints":[{"address":"10.0.0.1","port":"80"}]}`)+`]`)
		}, why: "corrupt"},
		{name: "port out of range", edit: func(string) string {
			return withChecksum(Format, `[`+src("consul", `{"name":"web","endpoints":[{"address":"10.0.0.1","port":4294967296}]}`)+`]`)
		}, why: "corrupt"},
		{name: "source twice", edit: func(string) string {
			return withChecksum(Format, `[`+src("consul", svc)+`,`+src("consul", svc)+`]`)
		}, why: `source "consul" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := New(dir, fps, nil).Save(stored()); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, FileName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tt.edit(string(b))), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			got, err := New(dir, fps, slog.New(slog.NewTextHandler(&logs, nil))).Load()
			if got != nil || err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("Load() = %v, %v; want no state and an error naming %s and saying %q", got, err, path, tt.why)
			}
			if logs.Len() > 0 {
				t.Errorf("logged %q: the error is the caller's to log", logs.String())
			}
			// The next save replaces the file with one that loads.
			if err := New(dir, fps, nil).Save(stored()); err != nil {
				t.Fatal(err)
			}
			if got, err := New(dir, fps, nil).Load(); err != nil || len(got) != 2 {
				t.Errorf("after a save: Load() = %v, %v", got, err)
			}
		})
	}
	t.Run("no file", func(t *testing.T) {
		if got, err := New(t.TempDir(), fps, nil).Load(); got != nil || err != nil {
			t.Errorf("Load() = %v, %v; want nothing", got, err)
		}
	})
	t.Run("a file where the directory should be", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		if err := os.WriteFile(dir, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := New(dir, fps, nil).Load(); got != nil || err != nil {
			t.Errorf("Load() = %v, %v; want nothing: no state file can be there", got, err)
		}
	})
	t.Run("a directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, FileName), 0o700); err != nil {
			t.Fatal(err)
		}
		if got, err := New(dir, fps, nil).Load(); got != nil || err == nil {
			t.Errorf("Load() = %v, %v; want no state and an error", got, err)
		}
	})
}

// TestLoadIgnoresSource: a source whose state cannot be used is left out
// whole, with a WARN line, and the other sources load.
func TestLoadIgnoresSource(t *testing.T) {
	bad := func(endpoint string) string {
		return withChecksum(Format, `[{"name":"consul","fingerprint":"`+fps["consul"]+
			`","services":[{"name":"ok","endpoints":[]},{"name":"web","endpoints":[`+endpoint+`]}]},`+
			`{"name":"dns","fingerprint":"`+fps["dns"]+`","services":[]}]`)
	}
	tests := []struct {
		name    string
		file    string // default: stored() saved
		fps     map[string]string
		want    []string // sources loaded
		logWant string
	}{
		{name: "reconfigured source", fps: map[string]string{"consul": "other", "dns": fps["dns"]}, want: []string{"dns"},
			logWant: "configuration changed"},
		{name: "source no longer configured", fps: map[string]string{"dns": fps["dns"]}, want: []string{"dns"}},
		{name: "unknown health", file: bad(`{"address":"10.0.0.1","port":80,"health":"sleepy"}`), want: []string{"dns"},
			logWant: "sleepy"},
		{name: "address not an IP", file: bad(`{"address":"web.example.org","port":80,"health":"healthy"}`),
			want: []string{"dns"}, logWant: "not an IP address"},
		{name: "no port", file: bad(`{"address":"10.0.0.1","health":"healthy"}`), want: []string{"dns"},
			logWant: "outside 1..65535"},
		{name: "format 1 health out of range", file: withChecksum(format1, `[{"name":"consul","fingerprint":"`+fps["consul"]+
			`","services":[{"Name":"web","Endpoints":[{"Address":"10.0.0.1","Port":80,"Health":9}]}]},`+
			`{"name":"dns","fingerprint":"`+fps["dns"]+`","services":[]}]`), want: []string{"dns"}, logWant: "health(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.file == "" {
				if err := New(dir, fps, nil).Save(stored()); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(filepath.Join(dir, FileName), []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			f := fps
			if tt.fps != nil {
				f = tt.fps
			}
			var logs bytes.Buffer
			got, err := New(dir, f, slog.New(slog.NewTextHandler(&logs, nil))).Load()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(slices.Sorted(maps.Keys(got)), tt.want) {
				t.Errorf("loaded sources %v, want %v", slices.Sorted(maps.Keys(got)), tt.want)
			}
			if tt.logWant != "" && (!strings.Contains(logs.String(), tt.logWant) || !strings.Contains(logs.String(), "level=WARN")) {
				t.Errorf("log %q does not warn about %q", logs.String(), tt.logWant)
			}
			if tt.logWant == "" && strings.Contains(logs.String(), "WARN") {
				t.Errorf("unexpected warning: %s", logs.String())
			}
		})
	}
}

// FuzzLoad: whatever the file holds, Load returns without a crash, never
// state beside an error, and only state a source could have reported.
func FuzzLoad(f *testing.F) {
	for name := range formats {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format":"` + Format + `","checksum":"","sources":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := New(dir, fps, nil).Load()
		if err != nil && got != nil {
			t.Fatalf("Load() = %v with error %v: half a state", got, err)
		}
		for name, svcs := range got {
			if err := validate(svcs); err != nil {
				t.Errorf("source %s loaded with services that are not valid: %v", name, err)
			}
		}
	})
}

func TestFingerprint(t *testing.T) {
	a := Fingerprint("c", "consul", map[string]any{"x": 1, "y": []any{"a"}})
	if a != Fingerprint("c", "consul", map[string]any{"y": []any{"a"}, "x": 1}) {
		t.Error("fingerprint depends on map order")
	}
	if a == Fingerprint("c", "consul", map[string]any{"x": 2, "y": []any{"a"}}) {
		t.Error("fingerprint ignores a setting")
	}
}
