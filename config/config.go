// Package config loads and validates the bridge's configuration file.
//
// The file is YAML (JSON is accepted, being YAML too). Every setting has its
// default in one place (defaults, which docs/configuration.md is tested
// against) and is checked in one method (Config.Validate); unknown keys are
// errors; durations need a unit ("30s"; a bare number is an error, except
// 0). Every scalar key can be overridden from the environment (BRIDGE_ and
// the key in capitals, dots becoming underscores: BRIDGE_XDS_LISTEN), and
// the three an operator changes per host from command-line flags
// (AddFlags); flags beat the environment, which beats the file. A BRIDGE_
// variable that names no setting is reported in Warnings, because a typo
// there would otherwise be silently ignored.
//
// Every error that a user can fix is a *settings.KeyError naming the key,
// such as `sources[1].type: unknown source type "foo"`; Load returns it in
// an *Error, one line naming the file, or the variable or flag the value
// came from.
package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/translate/istio"
	"github.com/xdsbridge/xdsbridge/xds"
)

// Config is the whole configuration of one bridge.
type Config struct {
	XDS     XDS     `mapstructure:"xds"`
	Admin   Admin   `mapstructure:"admin"`
	Log     Log     `mapstructure:"log"`
	Holdoff Holdoff `mapstructure:"holdoff"`
	Memory  Memory  `mapstructure:"memory"`
	// StateDir, when set, is where the state is persisted for warm starts.
	StateDir string           `mapstructure:"state_dir"`
	Guard    GuardDefaults    `mapstructure:"guard"`
	Sources  []map[string]any `mapstructure:"sources"`
	// Clusters are the cluster shaping rules and Transforms the transform
	// list, as written (see shaping.go).
	Clusters   []map[string]any `mapstructure:"clusters"`
	Transforms []map[string]any `mapstructure:"transforms"`
	// Scopes are the per-node scoping rules as written (see scopes.go).
	Scopes map[string]any `mapstructure:"scopes"`
	// Routes, Listeners, Secrets and Resources are the sections of an
	// Envoy's listener side as written (see envoy.go).
	Routes    []map[string]any `mapstructure:"routes"`
	Listeners []map[string]any `mapstructure:"listeners"`
	Secrets   []map[string]any `mapstructure:"secrets"`
	Resources []map[string]any `mapstructure:"resources"`
	Outputs   []Output         `mapstructure:"outputs"`
	// Merge sets how a service reported by several sources is served.
	Merge manager.MergeConfig `mapstructure:"merge"`
	// Istio configures the Istio translation (istio.go).
	Istio Istio `mapstructure:"istio"`
	// Reload configures reloads of this configuration at run time.
	Reload Reload `mapstructure:"reload"`

	// Entries are the parsed Sources, in configuration order (which is
	// their precedence order).
	Entries []Source `mapstructure:"-"`
	// Dir is the absolute directory of the configuration file; relative
	// paths in source settings are relative to it.
	Dir string `mapstructure:"-"`
	// Path is the configuration file's absolute path (empty when the
	// configuration did not come from Load); File is the file as Load was
	// given it, which is how messages name it, as the user wrote it.
	Path string `mapstructure:"-"`
	File string `mapstructure:"-"`
	// Digest is the SHA-256 of the file's content as Load read it, so
	// that a watch of the file can tell a change from a rewrite of the
	// same bytes.
	Digest [sha256.Size]byte `mapstructure:"-"`
	// Shaping and Chain are the built Clusters and Transforms.
	Shaping *translate.Shaping `mapstructure:"-"`
	Chain   *transform.Chain   `mapstructure:"-"`
	// ScopeRules are the built Scopes; nil: every node gets every service.
	ScopeRules *translate.Scopes `mapstructure:"-"`
	// RouteRules and ListenerSet are the built Routes and Listeners (nil
	// when there are none); SecretFiles and ResourceFiles the checked
	// Secrets and Resources entries, with absolute paths.
	RouteRules    *translate.Routes `mapstructure:"-"`
	ListenerSet   []Listener        `mapstructure:"-"`
	SecretFiles   []Secret          `mapstructure:"-"`
	ResourceFiles []ResourceFile    `mapstructure:"-"`
	// Warnings are what is suspicious but harmless, such as a BRIDGE_
	// variable that names no setting, one sentence each; Check lists
	// them and `bridge run` logs them.
	Warnings []string `mapstructure:"-"`

	// origins maps the settings that a flag or the environment set to
	// where their value came from (see originOf).
	origins map[string]string
}

// XDS configures the xDS gRPC listener.
type XDS struct {
	Listen string `mapstructure:"listen"`
	GRPC   struct {
		// Enabled adds the proxyless gRPC Listener/RouteConfiguration chain
		// for every service.
		Enabled bool `mapstructure:"enabled"`
	} `mapstructure:"grpc"`
	// UnknownNameWait is how long a request for an unknown resource name
	// waits before it is answered without it.
	UnknownNameWait time.Duration `mapstructure:"unknown_name_wait"`
	Keepalive       Keepalive     `mapstructure:"keepalive"`
	Limits          Limits        `mapstructure:"limits"`
	TLS             TLS           `mapstructure:"tls"`
	// Identity binds client certificates to the nodes they may claim;
	// empty binds nothing.
	Identity []Binding `mapstructure:"identity"`
	// ConfigCluster is the static cluster of the Envoys' bootstrap that
	// leads to this server, named in the config sources of clusters sent
	// to clients without ADS (per-type streams, REST).
	ConfigCluster string `mapstructure:"config_cluster"`
	REST          REST   `mapstructure:"rest"`
	// MaxResponseBytes bounds every xDS response (xds.Options).
	MaxResponseBytes int `mapstructure:"max_response_bytes"`
	// SendBudgetBytes bounds the large responses in flight (xds.Options).
	SendBudgetBytes int `mapstructure:"send_budget_bytes"`
	// RequestBudgetBytes bounds the large requests being decoded and
	// handled at once (xds.Options).
	RequestBudgetBytes int `mapstructure:"request_budget_bytes"`
}

// Keepalive configures gRPC keepalive: the server pings an idle client
// every Time and drops it after Timeout without an answer; clients may ping
// at most once per MinClientInterval. gRPC also makes Timeout every
// connection's TCP_USER_TIMEOUT, so the kernel drops a busy connection too
// when its client leaves the server's data unacknowledged, or its receive
// window closed, for Timeout (docs/deployment.md, Sizing).
type Keepalive struct {
	Time              time.Duration `mapstructure:"time"`
	Timeout           time.Duration `mapstructure:"timeout"`
	MinClientInterval time.Duration `mapstructure:"min_client_interval"`
	// MaxConnectionAge closes a connection (GOAWAY) after about this long,
	// gRPC adding ±10 % jitter, so that clients spread over new replicas;
	// its streams get MaxConnectionAgeGrace to move. 0 disables it.
	MaxConnectionAge      time.Duration `mapstructure:"max_connection_age"`
	MaxConnectionAgeGrace time.Duration `mapstructure:"max_connection_age_grace"`
}

// Admin configures the HTTP admin listener.
type Admin struct {
	Listen string `mapstructure:"listen"`
	TLS    TLS    `mapstructure:"tls"`
	// TokenFile holds a bearer token that every request but /healthz and
	// /readyz must present; empty requires none.
	TokenFile string `mapstructure:"token_file"`
	// PProf serves /debug/pprof/ (GET only).
	PProf bool `mapstructure:"pprof"`
}

// Log configures logging.
type Log struct {
	Level  string `mapstructure:"level"`  // debug, info, warn or error
	Format string `mapstructure:"format"` // text or json
}

// Holdoff configures how the source manager coalesces changes
// (manager.Cadence): a change after a quiet period is published Min after
// it, with whatever came meanwhile; under steady churn batches are
// published Min apart (back to back when a publish takes longer than Min).
// No change waits longer than Min beyond a publish in progress. Max must be
// at least Min and has no other effect.
type Holdoff struct {
	Min time.Duration `mapstructure:"min"`
	Max time.Duration `mapstructure:"max"`
}

// Reload configures reloads of the configuration at run time. SIGHUP and
// POST /-/reload on the admin listener always reload it.
type Reload struct {
	// WatchConfig also reloads the configuration when its file changes:
	// written in place, replaced by a rename, or (a Kubernetes ConfigMap
	// mounted as a volume) swapped with the symbolic links of its
	// directory. Changes are debounced; a file whose content did not
	// change is not reloaded.
	WatchConfig bool `mapstructure:"watch_config"`
}

// Memory configures how the process returns memory after a burst
// (internal/reclaim).
type Memory struct {
	// ReturnAfterQuiet is how long allocation must stay quiet after a
	// burst (a storm of connects, a push to every client) before the free
	// heap is collected and returned to the OS; 0 never does so.
	ReturnAfterQuiet time.Duration `mapstructure:"return_after_quiet"`
}

// Source is one entry of the sources list.
type Source struct {
	Name string
	Type string
	// Settings are the entry's other keys, handed to the type's New.
	Settings map[string]any
	// Index is the entry's position, used to name keys in errors.
	Index int
	// Startup and Guard say how the manager runs the source (keys
	// startup, guard).
	Startup manager.Startup
	Guard   manager.Guard
}

// Key returns the configuration key of the entry, such as "sources[1]".
func (s Source) Key() string { return fmt.Sprintf("sources[%d]", s.Index) }

// defaults holds the default of every scalar key. Every key must be here:
// viper binds environment variables only for keys it already knows.
var defaults = map[string]any{
	"xds.listen":                             "127.0.0.1:18000",
	"xds.grpc.enabled":                       true,
	"xds.unknown_name_wait":                  "5s",
	"xds.keepalive.time":                     "30s",
	"xds.keepalive.timeout":                  "10s",
	"xds.keepalive.min_client_interval":      "10s",
	"xds.keepalive.max_connection_age":       "30m",
	"xds.keepalive.max_connection_age_grace": "10s",
	"xds.max_response_bytes":                 xds.DefaultMaxResponseBytes,
	"xds.send_budget_bytes":                  xds.DefaultSendBudget,
	"xds.request_budget_bytes":               xds.DefaultRequestBudget,
	"xds.tls.cert_file":                      "",
	"xds.tls.key_file":                       "",
	"xds.tls.client_ca_file":                 "",
	"xds.tls.require_client_cert":            false,
	"xds.config_cluster":                     "xds_cluster",
	"xds.rest.enabled":                       false,
	"xds.rest.listen":                        RESTOnAdmin,
	"xds.rest.refresh_delay":                 "1s",
	"xds.rest.max_request_bytes":             1 << 20,
	"xds.limits.names_per_request":           xds.DefaultLimits.NamesPerRequest,
	"xds.limits.names_per_subscription":      xds.DefaultLimits.NamesPerSubscription,
	"xds.limits.unknown_names":               xds.DefaultLimits.UnknownNames,
	"xds.limits.streams":                     xds.DefaultLimits.Streams,
	"xds.limits.streams_per_connection":      xds.DefaultLimits.StreamsPerConnection,
	"xds.limits.request_bytes":               xds.DefaultLimits.RequestBytes,
	"admin.listen":                           "127.0.0.1:19000",
	"admin.tls.cert_file":                    "",
	"admin.tls.key_file":                     "",
	"admin.tls.client_ca_file":               "",
	"admin.tls.require_client_cert":          false,
	"admin.token_file":                       "",
	"admin.pprof":                            false,
	"log.level":                              "info",
	"log.format":                             "text",
	"holdoff.min":                            manager.DefaultHoldoff.String(),
	"holdoff.max":                            manager.DefaultMaxHoldoff.String(),
	"memory.return_after_quiet":              reclaim.DefaultPolicy.Quiet.String(),
	"state_dir":                              "",
	"guard.hold":                             manager.DefaultGuardHold.String(),
	"guard.max_removed_fraction":             manager.DefaultMaxRemovedFraction,
	"guard.min_removed":                      manager.DefaultMinRemoved,
	"guard.per_service":                      false,
	"merge.default":                          manager.MergeFirst,
	"istio.enabled":                          false,
	"istio.shape":                            string(istio.DefaultShape),
	"istio.host":                             istio.DefaultHost,
	"istio.protocol_key":                     istio.DefaultProtocolKey,
	"istio.default_protocol":                 istio.DefaultProtocol,
	"istio.default_port":                     istio.DefaultPort,
	"istio.location":                         istio.DefaultLocation,
	"istio.namespace":                        istio.DefaultNamespace,
	"istio.export_to":                        []string{},
	"reload.watch_config":                    false,
}

// Flags maps the command-line flags that override settings to their keys.
var Flags = map[string]string{
	"xds-listen":   "xds.listen",
	"admin-listen": "admin.listen",
	"log-level":    "log.level",
}

// AddFlags defines the overriding flags (see Flags) on fs.
func AddFlags(fs *pflag.FlagSet) {
	fs.String("xds-listen", "", "xDS gRPC listen address (overrides xds.listen)")
	fs.String("admin-listen", "", "admin HTTP listen address (overrides admin.listen)")
	fs.String("log-level", "", "log level: debug, info, warn or error (overrides log.level)")
}

// Load reads the file at path, applies the environment and the flags of fs
// that were set (fs may be nil), and validates the result, including each
// source's own settings (by calling its type's New, which does no I/O).
// Its errors are *Error values.
func Load(path string, fs *pflag.FlagSet) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Err: fmt.Errorf("reading config file: %w", err)}
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, &Error{File: path, Err: fmt.Errorf("locating config file: %w", err)}
	}
	cfg, err := parse(data, dir, fs)
	if err != nil {
		return nil, &Error{File: path, Err: err, at: indexPositions(data)}
	}
	cfg.Path = filepath.Join(dir, filepath.Base(path))
	cfg.File = path
	cfg.Digest = sha256.Sum256(data)
	return cfg, nil
}

// parse is Load on the file's content; dir is the file's directory. A
// *settings.KeyError it returns has its Origin set when the value came from
// a flag or the environment.
func parse(data []byte, dir string, fs *pflag.FlagSet) (*Config, error) {
	cfg := &Config{Dir: dir, origins: origins(fs), Warnings: unknownEnv(os.Environ())}
	if err := cfg.fill(data, fs); err != nil {
		return nil, settings.Attribute(err, cfg.originOf)
	}
	return cfg, nil
}

// fill decodes data, with the defaults, the environment and the flags of
// fs, into c and validates the result.
func (c *Config) fill(data []byte, fs *pflag.FlagSet) error {
	v := viper.New()
	for k, d := range defaults {
		v.SetDefault(k, d)
	}
	v.SetEnvPrefix(strings.TrimSuffix(envPrefix, "_"))
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	for flag, key := range Flags {
		if f := lookupFlag(fs, flag); f != nil {
			if err := v.BindPFlag(key, f); err != nil {
				return fmt.Errorf("binding flag --%s: %w", flag, err)
			}
		}
	}
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		// Viper's wrapping ("While parsing config: yaml: ...") says
		// nothing the reader needs.
		var pe viper.ConfigParseError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			err = pe.Unwrap()
		}
		return syntaxError(data, err)
	}
	if err := checkMergeShape(v.Get("merge.services")); err != nil {
		return err
	}
	// Every mistake is reported at once. Those that leave a section
	// undecoded stop the checks of values, which would only add mistakes
	// that follow from them; each source's own settings are checked
	// whatever the rest holds.
	decodeErr := errors.Join(settings.Decode(v.AllSettings(), c), c.rawLists(data))
	if err := c.parseSources(); err != nil {
		return errors.Join(decodeErr, err)
	}
	if decodeErr != nil {
		return errors.Join(decodeErr, c.validateSources())
	}
	c.resolvePaths()
	return c.Validate()
}

// setNameOrType stores val, which must be a string, in *name or *typ as k
// is "name" or "type"; key is the list entry's key, for the error.
func setNameOrType(key, k string, val any, name, typ *string) error {
	str, ok := val.(string)
	if !ok {
		return settings.Errorf(fmt.Sprintf("%s.%s", key, k), "%v", scalar.Mismatch("a string", val))
	}
	if k == "name" {
		*name = str
	} else {
		*typ = str
	}
	return nil
}

// parseSources splits each raw sources entry into name, type and settings.
func (c *Config) parseSources() error {
	c.Entries = make([]Source, 0, len(c.Sources))
	var errs []error
	for i, raw := range c.Sources {
		s := Source{Index: i, Settings: map[string]any{}}
		managed := map[string]any{}
		var entryErrs []error
		for k, val := range raw {
			switch {
			case managementKeys[k]:
				managed[k] = val
			case k == "name" || k == "type":
				entryErrs = append(entryErrs, setNameOrType(s.Key(), k, val, &s.Name, &s.Type))
			default:
				s.Settings[k] = val
			}
		}
		entryErrs = append(entryErrs, c.parseManagement(&s, managed))
		if err := errors.Join(entryErrs...); err != nil {
			errs = append(errs, err)
			continue
		}
		c.Entries = append(c.Entries, s)
	}
	return errors.Join(errs...)
}

// NewSource builds the source of entry s with its type's constructor; opts
// gets its BaseDir filled in from the config file's directory. Errors are
// *settings.KeyError values prefixed with the entry's key.
func (c *Config) NewSource(s Source, opts sources.Options) (sources.Source, error) {
	t, ok := sources.Lookup(s.Type)
	if !ok {
		return nil, settings.Errorf(s.Key()+".type", "unknown source type %q (known: %s)",
			s.Type, strings.Join(sources.Types(), ", "))
	}
	opts.Name = s.Name
	opts.BaseDir = c.Dir
	src, err := t.New(s.Settings, opts)
	if err != nil {
		return nil, settings.Prefix(s.Key(), err)
	}
	if src == nil {
		return nil, settings.Errorf(s.Key(), "source type %q returned no source", s.Type)
	}
	return src, nil
}
