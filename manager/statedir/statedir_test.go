package statedir

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

var (
	web = sources.Service{Name: "web", Endpoints: []sources.Endpoint{{Address: "10.0.0.1", Port: 8080, Weight: 2,
		Health: sources.HealthHealthy, Locality: sources.Locality{Zone: "z1"}, Metadata: map[string]string{"v": "1"}}}}
	fps = map[string]string{"consul": Fingerprint("consul", "consul", map[string]any{"address": "a:1"}), "dns": "x"}
)

func saved(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := New(dir, fps, nil).Save(map[string][]sources.Service{"consul": {web}, "dns": {}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRoundTrip(t *testing.T) {
	dir := saved(t)
	got := New(dir, fps, nil).Load()
	if len(got) != 2 || len(got["consul"]) != 1 || !got["consul"][0].Equal(web) || len(got["dns"]) != 0 {
		t.Fatalf("loaded %+v", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".state-*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(string) string
		fps     map[string]string
		want    []string // sources loaded
		logWant string
	}{
		{name: "missing file", edit: func(string) string { return "" }},
		{name: "truncated", edit: func(s string) string { return s[:len(s)/2] }, logWant: "corrupt"},
		{name: "garbage", edit: func(string) string { return "\x00\x01" }, logWant: "corrupt"},
		{name: "other format", edit: func(s string) string { return strings.Replace(s, Format, "xdsbridge-state/0", 1) },
			logWant: "another version"},
		{name: "altered", edit: func(s string) string { return strings.Replace(s, "8080", "8081", 1) }, logWant: "checksum"},
		{name: "reconfigured source", fps: map[string]string{"consul": "other", "dns": "x"}, want: []string{"dns"},
			logWant: "configuration changed"},
		{name: "source no longer configured", fps: map[string]string{"dns": "x"}, want: []string{"dns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := saved(t)
			path := filepath.Join(dir, FileName)
			if tt.edit != nil {
				b, _ := os.ReadFile(path)
				if s := tt.edit(string(b)); s == "" {
					os.Remove(path)
				} else if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f := fps
			if tt.fps != nil {
				f = tt.fps
			}
			var logs bytes.Buffer
			got := New(dir, f, slog.New(slog.NewTextHandler(&logs, nil))).Load()
			if len(got) != len(tt.want) {
				t.Errorf("loaded %d sources, want %v", len(got), tt.want)
			}
			for _, n := range tt.want {
				if _, ok := got[n]; !ok {
					t.Errorf("source %s not loaded", n)
				}
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

func TestLoadRejectsInvalidServices(t *testing.T) {
	dir := t.TempDir()
	bad := sources.Service{Name: "web", Endpoints: []sources.Endpoint{{Address: "not-an-ip", Port: 80}}}
	if err := New(dir, fps, nil).Save(map[string][]sources.Service{"consul": {bad}}); err != nil {
		t.Fatal(err)
	}
	if got := New(dir, fps, nil).Load(); len(got) != 0 {
		t.Errorf("loaded %v", got)
	}
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
