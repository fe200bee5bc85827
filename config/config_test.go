package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/xds"
)

// fakeSource is the source type "fake" the tests configure. Its New decodes
// its settings strictly and remembers them, like a real type.
type fakeSource struct {
	Path  string `mapstructure:"path"`
	Limit int    `mapstructure:"limit"`
	dir   string
}

func (f *fakeSource) Run(ctx context.Context, _ chan<- sources.Update) error {
	<-ctx.Done()
	return nil
}

func init() {
	sources.Register(sources.Type{Name: "fake", New: func(cfg map[string]any, opts sources.Options) (sources.Source, error) {
		f := &fakeSource{dir: opts.BaseDir}
		if err := settings.Decode(cfg, f); err != nil {
			return nil, err
		}
		if f.Path == "" {
			return nil, settings.Errorf("path", "is required")
		}
		return f, nil
	}})
}

const minimal = `
sources:
  - name: static
    type: fake
    path: services.yaml
`

func TestDefaults(t *testing.T) {
	cfg, err := parse([]byte(minimal), "/etc/bridge", nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"xds.listen", cfg.XDS.Listen, "127.0.0.1:18000"},
		{"xds.grpc.enabled", cfg.XDS.GRPC.Enabled, true},
		{"xds.unknown_name_wait", cfg.XDS.UnknownNameWait, 5 * time.Second},
		{"xds.max_response_bytes", cfg.XDS.MaxResponseBytes, 4 << 20},
		{"xds.send_budget_bytes", cfg.XDS.SendBudgetBytes, 256 << 20},
		{"xds.request_budget_bytes", cfg.XDS.RequestBudgetBytes, 16 << 20},
		{"xds.keepalive.time", cfg.XDS.Keepalive.Time, 30 * time.Second},
		{"xds.keepalive.timeout", cfg.XDS.Keepalive.Timeout, 10 * time.Second},
		{"xds.keepalive.min_client_interval", cfg.XDS.Keepalive.MinClientInterval, 10 * time.Second},
		{"admin.listen", cfg.Admin.Listen, "127.0.0.1:19000"},
		{"log.level", cfg.Log.Level, "info"},
		{"log.format", cfg.Log.Format, "text"},
		{"holdoff.min", cfg.Holdoff.Min, 100 * time.Millisecond},
		{"holdoff.max", cfg.Holdoff.Max, time.Second},
		{"memory.return_after_quiet", cfg.Memory.ReturnAfterQuiet, time.Second},
		{"xds.limits", xds.Limits(cfg.XDS.Limits), xds.DefaultLimits},
		{"entries", len(cfg.Entries), 1},
		{"dir", cfg.Dir, "/etc/bridge"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	e := cfg.Entries[0]
	if e.Name != "static" || e.Type != "fake" || len(e.Settings) != 1 || e.Settings["path"] != "services.yaml" {
		t.Errorf("entry = %+v", e)
	}
}

func TestFileValues(t *testing.T) {
	cfg, err := parse([]byte(`
xds:
  listen: 0.0.0.0:8000
  grpc: {enabled: false}
  unknown_name_wait: 1s
  keepalive: {time: 1m, timeout: 2s, min_client_interval: 3s}
  limits: {names_per_request: 1, names_per_subscription: 2, unknown_names: 3, streams: 40, streams_per_connection: 5, request_bytes: 6}
admin: {listen: "[::1]:9000"}
log: {level: debug, format: json}
holdoff: {min: 50ms, max: 2s}
sources:
  - {name: a, type: fake, path: a.yaml, limit: 3}
  - {name: b, type: fake, path: /abs/b.yaml}
`), "/d", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.XDS.Listen != "0.0.0.0:8000" || cfg.XDS.GRPC.Enabled || cfg.XDS.UnknownNameWait != time.Second ||
		cfg.XDS.Keepalive != (Keepalive{time.Minute, 2 * time.Second, 3 * time.Second, 30 * time.Minute, 10 * time.Second}) ||
		cfg.Admin.Listen != "[::1]:9000" || cfg.Log != (Log{"debug", "json"}) ||
		cfg.Holdoff != (Holdoff{50 * time.Millisecond, 2 * time.Second}) ||
		cfg.XDS.Limits != (Limits{1, 2, 3, 40, 5, 6}) {
		t.Errorf("config = %+v", cfg)
	}
	if len(cfg.Entries) != 2 || cfg.Entries[0].Name != "a" || cfg.Entries[1].Name != "b" {
		t.Fatalf("entries = %+v", cfg.Entries)
	}
	src, err := cfg.NewSource(cfg.Entries[0], sources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := src.(*fakeSource); f.Limit != 3 || f.Path != "a.yaml" || f.dir != "/d" {
		t.Errorf("source = %+v", f)
	}
}

func TestInvalid(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		wantKey string
		wantMsg string
	}{
		{"unknown top key", "bogus: 1\n" + minimal, "bogus", "unknown key"},
		{"unknown nested key", "xds: {bogus: 1}\n" + minimal, "xds.bogus", "unknown key"},
		{"unknown deep key", "xds: {keepalive: {often: 1s}}\n" + minimal, "xds.keepalive.often", "unknown key"},
		{"unknown source type", minimal + "  - {name: x, type: foo}\n", "sources[1].type", `unknown source type "foo" (known: `},
		{"duplicate source name", minimal + "  - {name: b, type: fake, path: p}\n  - {name: static, type: fake, path: p}\n",
			"sources[2].name", `duplicate source name "static"`},
		{"missing source name", "sources: [{type: fake, path: p}]", "sources[0].name", "is required"},
		{"missing source type", "sources: [{name: n}]", "sources[0].type", "is required"},
		{"source key unknown", "sources: [{name: n, type: fake, path: p, color: red}]", "sources[0].color", "unknown key"},
		{"source key invalid", "sources: [{name: n, type: fake}]", "sources[0].path", "is required"},
		{"source key wrong type", "sources: [{name: n, type: fake, path: p, limit: many}]", "sources[0].limit", ""},
		{"no sources", "log: {level: info}", "sources", "at least one source"},
		{"xds listen no port", "xds: {listen: x}\n" + minimal, "xds.listen", `invalid address "x"`},
		{"xds listen bad port", "xds: {listen: 'localhost:http2'}\n" + minimal, "xds.listen", "invalid address"},
		{"admin listen bad", "admin: {listen: '1.2.3.4:99999'}\n" + minimal, "admin.listen", "invalid address"},
		{"bad duration", "holdoff: {min: soon}\n" + minimal, "holdoff.min", ""},
		{"zero keepalive", "xds: {keepalive: {time: 0s}}\n" + minimal, "xds.keepalive.time", "positive"},
		{"negative unknown name wait", "xds: {unknown_name_wait: -1s}\n" + minimal, "xds.unknown_name_wait", "positive"},
		{"tiny response limit", "xds: {max_response_bytes: 1000}\n" + minimal, "xds.max_response_bytes", "out of range"},
		{"send budget under the response limit", "xds: {send_budget_bytes: 1000}\n" + minimal, "xds.send_budget_bytes", "less than"},
		{"request budget under the request limit", "xds: {request_budget_bytes: 1000}\n" + minimal, "xds.request_budget_bytes", "less than"},
		{"request budget negative", "xds: {request_budget_bytes: -1}\n" + minimal, "xds.request_budget_bytes", "less than"},
		{"negative memory quiet", "memory: {return_after_quiet: -1s}\n" + minimal, "memory.return_after_quiet", "at least 100ms, or 0"},
		{"tiny memory quiet", "memory: {return_after_quiet: 1ms}\n" + minimal, "memory.return_after_quiet", "at least 100ms, or 0"},
		{"holdoff max below min", "holdoff: {min: 2s, max: 1s}\n" + minimal, "holdoff.max", "shorter"},
		{"bad level", "log: {level: loud}\n" + minimal, "log.level", "unknown level"},
		{"bad format", "log: {format: xml}\n" + minimal, "log.format", "unknown format"},
		{"bad grpc flag", "xds: {grpc: {enabled: perhaps}}\n" + minimal, "xds.grpc.enabled", ""},
		{"zero limit", "xds: {limits: {names_per_request: 0}}\n" + minimal, "xds.limits.names_per_request", "positive"},
		{"negative limit", "xds: {limits: {request_bytes: -1}}\n" + minimal, "xds.limits.request_bytes", "positive"},
		{"unknown limit", "xds: {limits: {types: 3}}\n" + minimal, "xds.limits.types", "unknown key"},
		{"streams per connection above streams", "xds: {limits: {streams: 10, streams_per_connection: 20}}\n" + minimal,
			"xds.limits.streams_per_connection", "more than xds.limits.streams"},
		{"key without cert", "xds: {tls: {key_file: k}}\n" + minimal, "xds.tls.cert_file", "is required"},
		{"cert without key", "admin: {tls: {cert_file: c}}\n" + minimal, "admin.tls.key_file", "is required"},
		{"client ca without tls", "xds: {tls: {client_ca_file: ca}}\n" + minimal, "xds.tls.cert_file", "client certificates"},
		{"require without ca", "xds: {tls: {cert_file: c, key_file: k, require_client_cert: true}}\n" + minimal,
			"xds.tls.client_ca_file", "require_client_cert"},
		{"identity without ca", "xds: {identity: [{peer: 'spiffe://x/*', node_id: '$1'}]}\n" + minimal,
			"xds.identity", "client_ca_file"},
		{"identity without peer", "xds: {tls: {cert_file: c, key_file: k, client_ca_file: ca}, identity: [{node_id: a}]}\n" + minimal,
			"xds.identity[0].peer", "is required"},
		{"identity bad ref", "xds: {tls: {cert_file: c, key_file: k, client_ca_file: ca}, identity: [{peer: 'a/*', node_cluster: '$2'}]}\n" + minimal,
			"xds.identity[0].node_cluster", "$2 refers past"},
		{"identity unknown key", "xds: {identity: [{peer: a, node: b}]}\n" + minimal, "xds.identity[0].node", "unknown key"},
		{"negative max age", "xds: {keepalive: {max_connection_age: -1s}}\n" + minimal, "xds.keepalive.max_connection_age", "negative"},
		{"bad pprof", "admin: {pprof: maybe}\n" + minimal, "admin.pprof", ""},
		{"guard fraction", "guard: {max_removed_fraction: 1.5}\n" + minimal, "guard.max_removed_fraction", "(0, 1]"},
		{"guard hold", "guard: {hold: 0s}\n" + minimal, "guard.hold", "positive"},
		{"source guard fraction", "sources: [{name: n, type: fake, path: p, guard: {max_removed_fraction: 0}}]",
			"sources[0].guard.max_removed_fraction", "(0, 1]"},
		{"source guard key", "sources: [{name: n, type: fake, path: p, guard: {off: true}}]", "sources[0].guard.off", "unknown key"},
		{"guard min removed", "guard: {min_removed: 0}\n" + minimal, "guard.min_removed", "at least 1"},
		{"guard per service", "guard: {per_service: maybe}\n" + minimal, "guard.per_service", ""},
		{"source guard min removed", "sources: [{name: n, type: fake, path: p, guard: {min_removed: -2}}]",
			"sources[0].guard.min_removed", "at least 1"},
		{"source guard hold", "sources: [{name: n, type: fake, path: p, guard: {hold: 0s}}]", "sources[0].guard.hold", "positive"},
		{"source startup timeout", "sources: [{name: n, type: fake, path: p, startup: {timeout: -1s}}]",
			"sources[0].startup.timeout", "positive"},
		{"source startup required", "sources: [{name: n, type: fake, path: p, startup: {required: maybe}}]",
			"sources[0].startup.required", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse([]byte(c.yaml), "/d", nil)
			var ke *settings.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error = %v, want a *settings.KeyError", err)
			}
			if ke.Key != c.wantKey || !strings.HasPrefix(err.Error(), c.wantKey+": ") {
				t.Errorf("key = %q (error %q), want %q", ke.Key, err, c.wantKey)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("error = %q, want it to contain %q", err, c.wantMsg)
			}
		})
	}
}

func TestSourcePolicies(t *testing.T) {
	cfg, err := parse([]byte(`
state_dir: /var/lib/xdsbridge
guard: {max_removed_fraction: 0.25, hold: 1m}
sources:
  - {name: a, type: fake, path: p}
  - {name: b, type: fake, path: p, startup: {timeout: 5s, required: true}, guard: {hold: 10s, min_removed: 3, per_service: true}}
  - {name: c, type: fake, path: p, guard: {enabled: false}}
`), "/d", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		startup manager.Startup
		guard   manager.Guard
	}{
		{manager.Startup{Timeout: 30 * time.Second}, manager.Guard{MaxRemovedFraction: 0.25, Hold: time.Minute, MinRemoved: manager.DefaultMinRemoved}},
		{manager.Startup{Timeout: 5 * time.Second, Required: true}, manager.Guard{MaxRemovedFraction: 0.25, Hold: 10 * time.Second, MinRemoved: 3, PerService: true}},
		{manager.Startup{Timeout: 30 * time.Second}, manager.Guard{}},
	}
	for i, w := range want {
		if e := cfg.Entries[i]; e.Startup != w.startup || e.Guard != w.guard {
			t.Errorf("%s: startup %+v guard %+v, want %+v %+v", e.Name, e.Startup, e.Guard, w.startup, w.guard)
		}
		if _, ok := cfg.Entries[i].Settings["guard"]; ok {
			t.Errorf("%s: guard left in the type's settings", cfg.Entries[i].Name)
		}
	}
	if cfg.StateDir != "/var/lib/xdsbridge" {
		t.Errorf("state_dir = %q", cfg.StateDir)
	}
}

func TestKnownTypesListed(t *testing.T) {
	_, err := parse([]byte("sources: [{name: x, type: foo}]"), "/d", nil)
	if err == nil || !strings.Contains(err.Error(), "known: "+strings.Join(sources.Types(), ", ")+")") {
		t.Errorf("error = %v, want it to list %v", err, sources.Types())
	}
}

// TestPrecedence checks flags beat the environment, which beats the file,
// which beats the defaults.
func TestPrecedence(t *testing.T) {
	file := "xds: {listen: '127.0.0.1:1'}\nadmin: {listen: '127.0.0.1:2'}\nlog: {level: warn}\n" + minimal
	cases := []struct {
		name                      string
		env                       map[string]string
		flags                     []string
		xds, admin, level, format string
	}{
		{name: "file", xds: "127.0.0.1:1", admin: "127.0.0.1:2", level: "warn", format: "text"},
		{name: "env beats file",
			env: map[string]string{"BRIDGE_XDS_LISTEN": "127.0.0.1:3", "BRIDGE_ADMIN_LISTEN": "127.0.0.1:4",
				"BRIDGE_LOG_LEVEL": "debug", "BRIDGE_LOG_FORMAT": "json"},
			xds: "127.0.0.1:3", admin: "127.0.0.1:4", level: "debug", format: "json"},
		{name: "flags beat env",
			env:   map[string]string{"BRIDGE_XDS_LISTEN": "127.0.0.1:3", "BRIDGE_ADMIN_LISTEN": "127.0.0.1:4", "BRIDGE_LOG_LEVEL": "debug"},
			flags: []string{"--xds-listen=127.0.0.1:5", "--admin-listen=127.0.0.1:6", "--log-level=error"},
			xds:   "127.0.0.1:5", admin: "127.0.0.1:6", level: "error", format: "text"},
		{name: "unset flags do not override",
			env:   map[string]string{"BRIDGE_LOG_LEVEL": "debug"},
			flags: []string{"--xds-listen=127.0.0.1:5"},
			xds:   "127.0.0.1:5", admin: "127.0.0.1:2", level: "debug", format: "text"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			AddFlags(fs)
			if err := fs.Parse(c.flags); err != nil {
				t.Fatal(err)
			}
			cfg, err := parse([]byte(file), "/d", fs)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.XDS.Listen != c.xds || cfg.Admin.Listen != c.admin || cfg.Log.Level != c.level || cfg.Log.Format != c.format {
				t.Errorf("got xds %q admin %q level %q format %q, want %q %q %q %q",
					cfg.XDS.Listen, cfg.Admin.Listen, cfg.Log.Level, cfg.Log.Format, c.xds, c.admin, c.level, c.format)
			}
		})
	}
}

func TestEnvValueValidated(t *testing.T) {
	t.Setenv("BRIDGE_XDS_LISTEN", "nonsense")
	_, err := parse([]byte(minimal), "/d", nil)
	if err == nil || !strings.HasPrefix(err.Error(), `xds.listen: invalid address "nonsense"`) {
		t.Errorf("error = %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(path, []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dir != dir || cfg.Path != path {
		t.Errorf("Dir, Path = %q, %q; want %q, %q", cfg.Dir, cfg.Path, dir, path)
	}
	// A relative path is made absolute: the status page names the file.
	t.Chdir(dir)
	if cfg, err := Load("bridge.yaml", nil); err != nil {
		t.Error(err)
	} else if cfg.Path != path {
		t.Errorf("Load(relative).Path = %q, want %q", cfg.Path, path)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), nil); err == nil {
		t.Error("loading a missing file succeeded")
	}
	if err := os.WriteFile(path, []byte("xds: [unclosed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, nil); err == nil {
		t.Error("loading malformed YAML succeeded")
	}
}
