package consul

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/settings"
)

// Config is the configuration of one consul source (the keys of its entry
// under `sources`, besides name and type). The consul CLI's environment
// variables fill the keys the entry leaves out (see consulEnv), defaults()
// the rest; validation is in validate(). docs/configuration.md lists the
// keys with their defaults, which a test holds to defaults().
type Config struct {
	// Address is host:port of the Consul agent (or a URL with the scheme).
	Address string `mapstructure:"address"`
	// Scheme is http or https; https when address starts with https://.
	Scheme string `mapstructure:"scheme"`
	// Token is the ACL token; TokenFile a file holding it (wins over
	// Token). Neither is ever logged.
	Token     string    `mapstructure:"token"`
	TokenFile string    `mapstructure:"token_file"`
	TLS       TLSConfig `mapstructure:"tls"`

	// Datacenters to watch (none: the agent's own). They are the failover
	// order: the first is served at priority 0, the second at 1,
	// and so on; DatacenterPriority sets a datacenter's priority
	// explicitly (two datacenters at the same priority share the traffic
	// of that tier).
	Datacenters        []string          `mapstructure:"datacenters"`
	DatacenterPriority map[string]uint32 `mapstructure:"datacenter_priority"`
	// Namespace and Partition (Consul Enterprise) are passed to every query.
	Namespace string `mapstructure:"namespace"`
	Partition string `mapstructure:"partition"`

	Services ServiceSelector `mapstructure:"services"`
	// Tags an instance must all carry to be served.
	Tags []string `mapstructure:"tags"`
	// NodeMeta restricts instances to nodes with these metadata values.
	NodeMeta map[string]string `mapstructure:"node_meta"`
	// Filter is a Consul filter expression applied to /v1/health/service
	// (fields of a CheckServiceNode: Service.Meta.x, Node.Meta.y, ...).
	Filter string `mapstructure:"filter"`

	// AddressSource picks the endpoint address: "service" (the service
	// address, else the node's), "node", or a tagged address name such as
	// lan_ipv4 or wan (the service's tagged address, else the node's, else
	// as for "service").
	AddressSource string `mapstructure:"address_source"`
	// Warning is how instances with a warning check are served: healthy
	// (at Weights.Warning, as Consul's own xDS does) or degraded.
	Warning string `mapstructure:"warning"`
	// Critical is how instances with a critical check are served:
	// unhealthy or drop.
	Critical string `mapstructure:"critical"`
	// Locality names the node metadata keys holding region and zone.
	Locality LocalityConfig `mapstructure:"locality"`
	// ClusterName is a text/template over {{.Service}}, {{.Datacenter}},
	// {{.Namespace}}, {{.Partition}}. Instances of services that render the
	// same name are served as one cluster.
	ClusterName string `mapstructure:"cluster_name"`
	// KeepMesh serves Connect sidecar proxies, mesh, terminating,
	// ingress and API gateways and the consul service itself as ordinary
	// clusters; by default they are left out (they are not what a client
	// means by the service's name).
	KeepMesh bool `mapstructure:"keep_mesh"`
	// OnEmpty is what happens to a service with no instances left: "empty"
	// (the cluster stays, with no endpoints) or "remove".
	OnEmpty string `mapstructure:"on_empty"`

	// Stale allows any server to answer; Cached uses the agent's cache for
	// service reads.
	Stale  *bool `mapstructure:"stale"`
	Cached bool  `mapstructure:"cached"`
	// SweepCached reads sweeps from the agent's cache: on a client agent
	// with the streaming backend the answers come from the agent's
	// materialized views and reach no server; elsewhere each service read
	// once keeps a background blocking query in the agent.
	SweepCached *bool `mapstructure:"sweep_cached"`
	// MaxStale bounds a stale read: an answer whose server last heard
	// from the leader longer ago (X-Consul-LastContact) is read again from
	// the leader.
	MaxStale time.Duration `mapstructure:"max_stale"`
	// Wait is the blocking query wait time, at most Consul's 10m.
	Wait time.Duration `mapstructure:"wait"`
	// MaxConcurrentFetches bounds the non-blocking service reads in
	// flight.
	MaxConcurrentFetches int `mapstructure:"max_concurrent_fetches"`
	// MaxReadRate paces the non-blocking reads: at most this many start
	// per second, evenly spaced. 0 leaves them bounded by
	// MaxConcurrentFetches only.
	MaxReadRate float64 `mapstructure:"max_read_rate"`
	// MaxConnections caps the HTTP connections to the agent, watches
	// included. At 0 the source takes three quarters of what the agent
	// allows one client address (limits.http_max_conns_per_client, read
	// from /v1/agent/self) and leaves the rest to the other programs on the
	// host, which share that allowance; fallbackConns when the agent does
	// not say (a token without agent:read). Over HTTP/2 only the connections
	// the watches fill are opened. A value set here wins.
	MaxConnections int `mapstructure:"max_connections"`
	// Watch holds a blocking query on /v1/health/service/<name> for as
	// many services as the connections left allow: over
	// HTTP/2 (the agent's HTTPS listener) each such connection carries
	// WatchesPerConnection of them, over HTTP/1.1 one. A watched service's
	// changes arrive as they happen and it needs no sweep; see the
	// package documentation for what this costs Consul.
	Watch *bool `mapstructure:"watch"`
	// WatchesPerConnection is how many watches one HTTP/2 connection
	// carries; the agent allows 250 streams per connection (Go's
	// default), and the rest leaves room for reads.
	WatchesPerConnection int `mapstructure:"watches_per_connection"`
	// ResyncGrace is accepted, with a warning (Check, and Run's log), and
	// has no effect: the first update after Consul lost its state says so
	// (sources.Update.Reset) and the removal guard keeps the last good
	// state until the refill settles. Refusing a key that only ever
	// delayed removals would turn an upgrade into an outage.
	ResyncGrace *time.Duration `mapstructure:"resync_grace"`
	// RetryMin and RetryMax bound the exponential backoff of each failed
	// read and blocking query.
	RetryMin time.Duration `mapstructure:"retry_min"`
	RetryMax time.Duration `mapstructure:"retry_max"`
	// ReadTimeout is the deadline of every request that does not block,
	// and the margin a blocking query gets beyond its wait and Consul's
	// jitter (wait/16). A request past its deadline counts as a failure.
	// The agent monitor probes every half of it while the agent answers,
	// so a hung agent is noticed within one and a half times this.
	ReadTimeout time.Duration `mapstructure:"read_timeout"`
	// MaxResponseBytes bounds the body of any one answer from the agent,
	// with room for the largest listing a big catalog's checks make. A
	// larger answer is a failed read, never a partial one: the service
	// keeps its last state and the source says why.
	MaxResponseBytes int64 `mapstructure:"max_response_bytes"`

	// origins maps the keys filled from the environment to their variable,
	// so that an error about one names the variable.
	origins map[string]string
}

// TLSConfig configures HTTPS to the agent. CAPath is a directory of CA
// certificates, used besides CAFile.
type TLSConfig struct {
	CAFile     string `mapstructure:"ca_file"`
	CAPath     string `mapstructure:"ca_path"`
	CertFile   string `mapstructure:"cert_file"`
	KeyFile    string `mapstructure:"key_file"`
	ServerName string `mapstructure:"server_name"`
	// InsecureSkipVerify disables certificate checks; for tests only.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// ServiceSelector selects services by name with path.Match globs: a
// service is watched when it matches an include (or there are none) and
// no exclude.
type ServiceSelector struct {
	Include []string `mapstructure:"include"`
	Exclude []string `mapstructure:"exclude"`
}

// LocalityConfig names node metadata keys. Region defaults to the
// datacenter when RegionKey is empty or the node lacks it.
type LocalityConfig struct {
	RegionKey  string `mapstructure:"region_key"`
	ZoneKey    string `mapstructure:"zone_key"`
	SubZoneKey string `mapstructure:"subzone_key"`
}

// Values of the enumerated keys.
const (
	AddressService = "service"
	AddressNode    = "node"
	WarningHealthy = "healthy"
	WarningDegrade = "degraded"
	CriticalDrop   = "drop"
	CriticalUnhlth = "unhealthy"
	OnEmptyEmpty   = "empty"
	OnEmptyRemove  = "remove"
)

// newConfig decodes a source's raw configuration, fills what it leaves
// out from the environment (see consulEnv) and the defaults, and validates
// it; baseDir resolves relative file paths. An error about a value taken
// from the environment names the variable (settings.KeyError.Origin).
func newConfig(raw map[string]any, baseDir string) (Config, *template.Template, error) {
	c := Config{origins: map[string]string{}}
	if err := settings.Decode(raw, &c); err != nil {
		return c, nil, err
	}
	if err := c.environment(raw); err != nil {
		return c, nil, err
	}
	c.defaults()
	tmpl, err := c.validate(baseDir)
	return c, tmpl, settings.Attribute(err, c.origin)
}

// origin says where the value of key came from: an environment variable,
// or "" for the configuration file.
func (c *Config) origin(key string) string { return c.origins[key] }

// consulEnv are the consul CLI's variables that apply to reading the
// catalog, in the order they are read, each with the keys it yields to
// (the first is the one it fills: a key the entry sets, or an earlier
// variable filled, wins, as the consul CLI's flags beat its variables)
// and how it fills it. Paths are made absolute against the working
// directory, as the consul CLI reads them. CONSUL_HTTP_AUTH (HTTP basic
// authentication) is not read.
var consulEnv = []struct {
	name string
	keys []string
	fill func(c *Config, v string) error
}{
	{"CONSUL_HTTP_ADDR", []string{"address"}, func(c *Config, v string) error { c.Address = v; return nil }},
	{"CONSUL_HTTP_TOKEN_FILE", []string{"token_file", "token"}, func(c *Config, v string) error { c.TokenFile = absolute(v); return nil }},
	{"CONSUL_HTTP_TOKEN", []string{"token", "token_file"}, func(c *Config, v string) error { c.Token = v; return nil }},
	{"CONSUL_HTTP_SSL", []string{"scheme"}, func(c *Config, v string) error {
		on, err := scalar.Bool(v)
		if on {
			c.Scheme = "https"
		}
		return err
	}},
	{"CONSUL_HTTP_SSL_VERIFY", []string{"tls.insecure_skip_verify"}, func(c *Config, v string) error {
		verify, err := scalar.Bool(v)
		c.TLS.InsecureSkipVerify = !verify
		return err
	}},
	{"CONSUL_CACERT", []string{"tls.ca_file"}, func(c *Config, v string) error { c.TLS.CAFile = absolute(v); return nil }},
	{"CONSUL_CAPATH", []string{"tls.ca_path"}, func(c *Config, v string) error { c.TLS.CAPath = absolute(v); return nil }},
	{"CONSUL_CLIENT_CERT", []string{"tls.cert_file"}, func(c *Config, v string) error { c.TLS.CertFile = absolute(v); return nil }},
	{"CONSUL_CLIENT_KEY", []string{"tls.key_file"}, func(c *Config, v string) error { c.TLS.KeyFile = absolute(v); return nil }},
	{"CONSUL_TLS_SERVER_NAME", []string{"tls.server_name"}, func(c *Config, v string) error { c.TLS.ServerName = v; return nil }},
	{"CONSUL_NAMESPACE", []string{"namespace"}, func(c *Config, v string) error { c.Namespace = v; return nil }},
	{"CONSUL_PARTITION", []string{"partition"}, func(c *Config, v string) error { c.Partition = v; return nil }},
}

// environment fills, from consulEnv, the keys raw (the entry as written)
// leaves out, and records where each came from in origins.
func (c *Config) environment(raw map[string]any) error {
	for _, e := range consulEnv {
		v := os.Getenv(e.name)
		if v == "" || slices.ContainsFunc(e.keys, func(k string) bool { return written(raw, k) || c.origins[k] != "" }) {
			continue
		}
		origin := "environment variable " + e.name
		if err := e.fill(c, v); err != nil {
			return &settings.KeyError{Key: e.keys[0], Err: err, Origin: origin}
		}
		c.origins[e.keys[0]] = origin
	}
	return nil
}

// written reports whether raw sets key, such as "tls.ca_file".
func written(raw map[string]any, key string) bool {
	top, sub, nested := strings.Cut(key, ".")
	v, ok := raw[top]
	if m, isMap := v.(map[string]any); nested && isMap {
		_, ok = m[sub]
	}
	return ok
}

// absolute makes a path from the environment absolute against the working
// directory; the configuration's paths are relative to its file.
func absolute(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func (c *Config) defaults() {
	if c.Address == "" {
		c.Address = "127.0.0.1:8500"
	}
	if c.Scheme == "" {
		c.Scheme = "http"
		if strings.HasPrefix(c.Address, "https://") {
			c.Scheme = "https"
		}
	}
	if c.AddressSource == "" {
		c.AddressSource = AddressService
	}
	if c.Warning == "" {
		c.Warning = WarningHealthy
	}
	if c.Critical == "" {
		c.Critical = CriticalUnhlth
	}
	if c.ClusterName == "" {
		c.ClusterName = "{{.Service}}"
	}
	if c.OnEmpty == "" {
		c.OnEmpty = OnEmptyEmpty
	}
	if c.Stale == nil {
		t := true
		c.Stale = &t
	}
	if c.Wait == 0 {
		c.Wait = 5 * time.Minute
	}
	if c.MaxConcurrentFetches == 0 {
		c.MaxConcurrentFetches = 8
	}
	if c.Watch == nil {
		t := true
		c.Watch = &t
	}
	if c.WatchesPerConnection == 0 {
		c.WatchesPerConnection = 200
	}
	if c.RetryMin == 0 {
		c.RetryMin = 250 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 30 * time.Second
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 5 * time.Second
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = 64 << 20
	}
	if c.SweepCached == nil {
		t := true
		c.SweepCached = &t
	}
	if c.MaxStale == 0 {
		c.MaxStale = 10 * time.Second
	}
}

// validate checks the defaulted configuration; baseDir resolves relative
// file paths.
func (c *Config) validate(baseDir string) (*template.Template, error) {
	oneOf := func(key, v string, allowed ...string) error {
		if slices.Contains(allowed, v) {
			return nil
		}
		return settings.Errorf(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
	if err := oneOf("scheme", c.Scheme, "http", "https"); err != nil {
		return nil, err
	}
	if err := checkAddress(c.Address, c.Scheme); err != nil {
		return nil, settings.Errorf("address", "%v", err)
	}
	if err := oneOf("warning", c.Warning, WarningDegrade, WarningHealthy); err != nil {
		return nil, err
	}
	if err := oneOf("critical", c.Critical, CriticalUnhlth, CriticalDrop); err != nil {
		return nil, err
	}
	if err := oneOf("on_empty", c.OnEmpty, OnEmptyEmpty, OnEmptyRemove); err != nil {
		return nil, err
	}
	for i, dc := range c.Datacenters {
		if dc == "" {
			return nil, settings.Errorf(fmt.Sprintf("datacenters[%d]", i), "empty datacenter name")
		}
		if slices.Contains(c.Datacenters[:i], dc) {
			return nil, settings.Errorf(fmt.Sprintf("datacenters[%d]", i), "%q listed twice", dc)
		}
	}
	for dc := range c.DatacenterPriority {
		if !slices.Contains(c.Datacenters, dc) {
			return nil, settings.Errorf("datacenter_priority."+dc, "%q is not in datacenters", dc)
		}
	}
	if c.MaxStale < 0 {
		return nil, settings.Errorf("max_stale", "must not be negative")
	}
	for key, globs := range map[string][]string{"services.include": c.Services.Include, "services.exclude": c.Services.Exclude} {
		for i, g := range globs {
			if _, err := path.Match(g, ""); err != nil {
				return nil, settings.Errorf(fmt.Sprintf("%s[%d]", key, i), "bad glob %q: %v", g, err)
			}
		}
	}
	if c.Wait < time.Second || c.Wait > 10*time.Minute {
		return nil, settings.Errorf("wait", "%v is outside 1s..10m", c.Wait)
	}
	if c.MaxReadRate < 0 {
		return nil, settings.Errorf("max_read_rate", "must not be negative")
	}
	if c.MaxConcurrentFetches < 1 {
		return nil, settings.Errorf("max_concurrent_fetches", "must be at least 1")
	}
	if fixed := fixedConns(len(c.Datacenters)); c.MaxConnections != 0 && c.MaxConnections < fixed+1 {
		return nil, settings.Errorf("max_connections", "%d leaves no connection for reads: the source holds %d blocking queries and a probe", c.MaxConnections, fixed)
	}
	if c.WatchesPerConnection < 1 {
		return nil, settings.Errorf("watches_per_connection", "must be at least 1")
	}
	if c.ReadTimeout < 100*time.Millisecond || c.ReadTimeout > time.Minute {
		return nil, settings.Errorf("read_timeout", "%v is outside 100ms..1m", c.ReadTimeout)
	}
	if c.MaxResponseBytes < 1<<10 {
		return nil, settings.Errorf("max_response_bytes", "%d is below 1024", c.MaxResponseBytes)
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		return nil, settings.Errorf("retry_max", "retry_min (%v) must be positive and at most retry_max (%v)", c.RetryMin, c.RetryMax)
	}
	for _, f := range []*string{&c.TokenFile, &c.TLS.CAFile, &c.TLS.CAPath, &c.TLS.CertFile, &c.TLS.KeyFile} {
		if *f != "" && !filepath.IsAbs(*f) && baseDir != "" {
			*f = filepath.Join(baseDir, *f)
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return nil, settings.Errorf("tls.key_file", "cert_file and key_file go together")
	}
	sample := nameData{Service: "s", Datacenter: "dc"}
	tmpl, err := template.New("cluster_name").Option("missingkey=error").Parse(c.ClusterName)
	if err == nil {
		_, err = renderName(tmpl, sample)
	}
	if err != nil {
		return nil, settings.Errorf("cluster_name", "%v", scalar.TemplateError(err, sample))
	}
	return tmpl, nil
}

// nameData is what the cluster_name template sees.
type nameData struct {
	Service, Datacenter, Namespace, Partition string
}

func renderName(t *template.Template, d nameData) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("rendering cluster_name: %w", err)
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("rendering cluster_name: empty name for service %q", d.Service)
	}
	return b.String(), nil
}

func (c *Config) sweepCached() bool { return c.SweepCached != nil && *c.SweepCached }

// priority is the failover priority of the i-th datacenter.
func (c *Config) priority(i int, dc string) uint32 {
	if p, ok := c.DatacenterPriority[dc]; ok {
		return p
	}
	return uint32(i)
}

// consulService is the name under which Consul servers register
// themselves.
const consulService = "consul"

// selected reports whether the service name passes the include/exclude
// globs and its catalog tags can satisfy the required tags; the consul
// service only with keep_mesh.
func (c *Config) selected(name string, tags []string) bool {
	if name == consulService && !c.KeepMesh {
		return false
	}
	if len(c.Services.Include) > 0 && !matchAny(c.Services.Include, name) {
		return false
	}
	if matchAny(c.Services.Exclude, name) {
		return false
	}
	for _, want := range c.Tags {
		if !slices.Contains(tags, want) {
			return false
		}
	}
	return true
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
