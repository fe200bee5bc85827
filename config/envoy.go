package config

import (
	"errors"
	"fmt"
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/static"
	"github.com/xdsbridge/xdsbridge/translate"
)

// The sections that describe an Envoy's listener side: route
// configurations built from the registry (routes), listeners, secrets from
// PEM files, and files of raw Envoy resources. Validate builds what needs
// no I/O (route rules, listeners) and checks the rest; Check reads the
// files, and the bridge reads them again at startup and whenever they
// change.

// Listener is a built listener of the `listeners` section and the names of
// the scopes whose wildcard subscriptions deliver it (nil: every node).
type Listener struct {
	Resource *listenerv3.Listener
	Scopes   []string
	// Secrets and RouteConfig are the SDS secret and route configuration
	// names it refers to, for Check.
	Secrets     []string
	RouteConfig string
}

// Secret is an entry of the `secrets` section: a tls_certificate (a
// certificate chain and its private key) or a validation_context (a CA
// bundle), read from PEM files (absolute paths once validated), served
// only to the nodes of the scopes named in Grant. A CA bundle without
// Grant goes to every node that asks; a private key never does.
type Secret struct {
	Name            string   `mapstructure:"name"`
	CertificateFile string   `mapstructure:"certificate_file"`
	PrivateKeyFile  string   `mapstructure:"private_key_file"`
	CAFile          string   `mapstructure:"ca_file"`
	Grant           []string `mapstructure:"grant"`
	// Index is the entry's position, for keys in errors.
	Index int `mapstructure:"-"`
}

// Key is the entry's key, such as "secrets[1]".
func (s Secret) Key() string { return fmt.Sprintf("secrets[%d]", s.Index) }

// Files are the files the secret is read from, with their keys.
func (s Secret) Files() [][2]string {
	if s.CAFile != "" {
		return [][2]string{{s.Key() + ".ca_file", s.CAFile}}
	}
	return [][2]string{{s.Key() + ".certificate_file", s.CertificateFile}, {s.Key() + ".private_key_file", s.PrivateKeyFile}}
}

// ResourceFile is an entry of the `resources` section: a file of raw Envoy
// resources (see translate.ParseRaw), watched. Scopes name the scopes
// whose wildcards deliver its listeners and clusters (nil: every node);
// Grant the scopes its secrets are served to.
type ResourceFile struct {
	File   string   `mapstructure:"file"`
	Scopes []string `mapstructure:"scopes"`
	Grant  []string `mapstructure:"grant"`
	Index  int      `mapstructure:"-"`
}

// Key is the entry's key, such as "resources[0]".
func (r ResourceFile) Key() string { return fmt.Sprintf("resources[%d]", r.Index) }

// routeEntry is one entry of the `routes` list before its fragment is
// parsed.
type routeEntry struct {
	Config      string           `mapstructure:"config"`
	Match       sources.Selector `mapstructure:"match"`
	Hosts       []string         `mapstructure:"hosts"`
	Paths       []string         `mapstructure:"paths"`
	TagPrefix   *string          `mapstructure:"tag_prefix"`
	MetadataKey string           `mapstructure:"metadata_key"`
	Route       map[string]any   `mapstructure:"route"`
}

// listenerEntry is one entry of the `listeners` list before its fragments
// are parsed.
type listenerEntry struct {
	Name    string `mapstructure:"name"`
	Address string `mapstructure:"address"`
	Port    uint32 `mapstructure:"port"`
	HTTP    *struct {
		RouteConfig       string         `mapstructure:"route_config"`
		StatPrefix        string         `mapstructure:"stat_prefix"`
		ConnectionManager map[string]any `mapstructure:"connection_manager"`
	} `mapstructure:"http"`
	TCP *struct {
		Cluster    string `mapstructure:"cluster"`
		StatPrefix string `mapstructure:"stat_prefix"`
	} `mapstructure:"tcp"`
	TLS *struct {
		Certificates             []string `mapstructure:"certificates"`
		Validation               string   `mapstructure:"validation"`
		RequireClientCertificate bool     `mapstructure:"require_client_certificate"`
	} `mapstructure:"tls"`
	Listener    map[string]any `mapstructure:"listener"`
	FilterChain map[string]any `mapstructure:"filter_chain"`
	Scopes      []string       `mapstructure:"scopes"`
}

// validateEnvoy builds the route rules and the listeners and checks the
// secrets and resource files (their entries; Check reads the files).
func (c *Config) validateEnvoy() error {
	err := errors.Join(c.validateRoutes(), c.validateListeners(), c.validateSecrets(), c.validateResourceFiles())
	// A resource file's secrets go only to the scopes it grants them to:
	// one that grants none serves no key, whatever it holds.
	keys := slices.ContainsFunc(c.SecretFiles, func(s Secret) bool { return s.CAFile == "" }) ||
		slices.ContainsFunc(c.ResourceFiles, func(r ResourceFile) bool { return len(r.Grant) > 0 })
	if len(c.XDS.Identity) == 0 && keys {
		c.Warnings = append(c.Warnings, "secrets are granted to scopes, which match what a node claims: without xds.identity, "+
			"any client that claims a granted node receives its private keys")
	}
	return err
}

func (c *Config) validateRoutes() error {
	c.RouteRules = nil
	if len(c.Routes) == 0 {
		return nil
	}
	rs := &translate.Routes{}
	var errs []error
	for i, raw := range c.Routes {
		key := fmt.Sprintf("routes[%d]", i)
		var e routeEntry
		if err := settings.Decode(raw, &e); err != nil {
			errs = append(errs, settings.Prefix(key, err))
			continue
		}
		r := translate.RouteRule{Config: e.Config, Match: e.Match, Hosts: e.Hosts, Paths: e.Paths,
			TagPrefix: translate.DefaultTagPrefix, MetadataKey: e.MetadataKey}
		if e.TagPrefix != nil {
			r.TagPrefix = *e.TagPrefix
		}
		built, err := translate.NewRouteRule(r, e.Route)
		if err != nil {
			errs = append(errs, settings.Prefix(key, err))
			continue
		}
		rs.Rules = append(rs.Rules, built)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.RouteRules = rs
	return nil
}

func (c *Config) validateListeners() error {
	c.ListenerSet = nil
	var errs []error
	seen := map[string]int{}
	for i, raw := range c.Listeners {
		key := fmt.Sprintf("listeners[%d]", i)
		var e listenerEntry
		if err := settings.Decode(raw, &e); err != nil {
			errs = append(errs, settings.Prefix(key, err))
			continue
		}
		if j, dup := seen[e.Name]; dup && e.Name != "" {
			errs = append(errs, settings.Errorf(key+".name", "%q is also the name of listeners[%d]", e.Name, j))
			continue
		}
		seen[e.Name] = i
		spec := translate.ListenerSpec{Name: e.Name, Address: e.Address, Port: e.Port, Listener: e.Listener, FilterChain: e.FilterChain}
		switch {
		case e.HTTP != nil && e.TCP != nil:
			errs = append(errs, settings.Errorf(key+".tcp", "a listener is http or tcp, not both"))
			continue
		case e.HTTP != nil:
			if e.HTTP.RouteConfig == "" {
				errs = append(errs, settings.Errorf(key+".http.route_config", "is required (the route configuration the listener takes by RDS)"))
				continue
			}
			spec.RouteConfig, spec.StatPrefix, spec.ConnectionManager = e.HTTP.RouteConfig, e.HTTP.StatPrefix, e.HTTP.ConnectionManager
		case e.TCP != nil:
			if e.TCP.Cluster == "" {
				errs = append(errs, settings.Errorf(key+".tcp.cluster", "is required (the cluster the TCP proxy connects to)"))
				continue
			}
			spec.Cluster, spec.StatPrefix = e.TCP.Cluster, e.TCP.StatPrefix
		default:
			errs = append(errs, settings.Errorf(key+".http", "a listener needs http (route_config) or tcp (cluster)"))
			continue
		}
		l := Listener{Scopes: e.Scopes, RouteConfig: spec.RouteConfig}
		if e.TLS != nil {
			spec.TLS = &translate.TLSSpec{Certificates: e.TLS.Certificates, Validation: e.TLS.Validation,
				RequireClientCertificate: e.TLS.RequireClientCertificate}
			l.Secrets = append(slices.Clone(e.TLS.Certificates), e.TLS.Validation)
			l.Secrets = slices.DeleteFunc(l.Secrets, func(s string) bool { return s == "" })
		}
		built, err := translate.NewListener(spec)
		if err != nil {
			errs = append(errs, settings.Prefix(key, remapListenerKey(err, e.HTTP != nil)))
			continue
		}
		if err := c.checkScopeNames(key+".scopes", e.Scopes); err != nil {
			errs = append(errs, err)
			continue
		}
		l.Resource = built
		c.ListenerSet = append(c.ListenerSet, l)
	}
	return errors.Join(errs...)
}

// remapListenerKey renames the keys of translate's listener errors to
// where the configuration writes them: the HTTP connection manager's
// fragment and route configuration are under http, the TCP cluster under
// tcp.
func remapListenerKey(err error, http bool) error {
	var ke *settings.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	switch {
	case ke.Key == "route_config" && http, ke.Key == "stat_prefix" && http:
		ke.Key = "http." + ke.Key
	case ke.Key == "cluster", ke.Key == "stat_prefix":
		ke.Key = "tcp." + ke.Key
	case len(ke.Key) >= len("connection_manager") && ke.Key[:len("connection_manager")] == "connection_manager":
		ke.Key = "http." + ke.Key
	}
	return err
}

func (c *Config) validateSecrets() error {
	c.SecretFiles = nil
	var errs []error
	seen := map[string]int{}
	for i, raw := range c.Secrets {
		key := fmt.Sprintf("secrets[%d]", i)
		var s Secret
		if err := settings.Decode(raw, &s); err != nil {
			errs = append(errs, settings.Prefix(key, err))
			continue
		}
		s.Index = i
		cert := s.CertificateFile != "" || s.PrivateKeyFile != ""
		switch {
		case s.Name == "":
			errs = append(errs, settings.Errorf(key+".name", "is required (the name listeners give in their SDS configuration)"))
		case seen[s.Name] > 0:
			errs = append(errs, settings.Errorf(key+".name", "%q is also the name of secrets[%d]", s.Name, seen[s.Name]-1))
		case cert && s.CAFile != "":
			errs = append(errs, settings.Errorf(key+".ca_file", "a secret is a certificate (certificate_file, private_key_file) or a CA bundle (ca_file), not both"))
		case cert && (s.CertificateFile == "" || s.PrivateKeyFile == ""):
			errs = append(errs, settings.Errorf(key+".private_key_file", "a certificate needs both certificate_file and private_key_file"))
		case !cert && s.CAFile == "":
			errs = append(errs, settings.Errorf(key+".certificate_file", "give certificate_file and private_key_file, or ca_file"))
		case cert && len(s.Grant) == 0:
			errs = append(errs, settings.Errorf(key+".grant", "is required for a private key: the scopes whose nodes may receive it (see scopes)"))
		default:
			if err := c.checkScopeNames(key+".grant", s.Grant); err != nil {
				errs = append(errs, err)
				continue
			}
			seen[s.Name] = i + 1
			s.CertificateFile, s.PrivateKeyFile, s.CAFile = c.resolve(s.CertificateFile), c.resolve(s.PrivateKeyFile), c.resolve(s.CAFile)
			c.SecretFiles = append(c.SecretFiles, s)
		}
	}
	return errors.Join(errs...)
}

func (c *Config) validateResourceFiles() error {
	c.ResourceFiles = nil
	var errs []error
	for i, raw := range c.Resources {
		key := fmt.Sprintf("resources[%d]", i)
		var r ResourceFile
		if err := settings.Decode(raw, &r); err != nil {
			errs = append(errs, settings.Prefix(key, err))
			continue
		}
		r.Index = i
		if r.File == "" {
			errs = append(errs, settings.Errorf(key+".file", "is required (a file of Envoy resources in YAML or JSON)"))
			continue
		}
		if err := errors.Join(c.checkScopeNames(key+".scopes", r.Scopes), c.checkScopeNames(key+".grant", r.Grant)); err != nil {
			errs = append(errs, err)
			continue
		}
		r.File = c.resolve(r.File)
		c.ResourceFiles = append(c.ResourceFiles, r)
	}
	return errors.Join(errs...)
}

// checkScopeNames checks that every name is a scope of the configuration.
func (c *Config) checkScopeNames(key string, names []string) error {
	for i, n := range names {
		if _, ok := c.ScopeRules.ID(n); !ok {
			return settings.Errorf(fmt.Sprintf("%s[%d]", key, i), "no scope is named %q (see scopes.rules)", n)
		}
	}
	return nil
}

// checkEnvoyFiles reads the secrets and resource files as the bridge will
// (for Check): a file that does not load is an error; a listener whose
// TLS names a secret, or whose HTTP names a route configuration, that
// nothing defines is a warning (it never finishes warming).
func (c *Config) checkEnvoyFiles() []sources.Problem {
	var out []sources.Problem
	defined := map[string]map[string]bool{"secret": {}, "route": {}, "listener": {}}
	for _, s := range c.SecretFiles {
		if _, err := static.LoadSecret(s.Name, s.CertificateFile, s.PrivateKeyFile, s.CAFile); err != nil {
			out = append(out, problem(settings.Prefix(s.Key(), err)))
		}
		defined["secret"][s.Name] = true
	}
	for _, n := range c.RouteRules.Configs() {
		defined["route"][n] = true
	}
	for _, l := range c.ListenerSet {
		defined["listener"][l.Resource.GetName()] = true
	}
	for _, f := range c.ResourceFiles {
		raw, err := static.LoadRaw(f.File)
		if err != nil {
			out = append(out, sources.Problem{Key: f.Key() + ".file", Err: err})
			continue
		}
		for _, l := range raw.Listeners {
			out = append(out, c.clash(f.Key(), "listener", l.GetName(), defined)...)
		}
		for _, r := range raw.Routes {
			out = append(out, c.clash(f.Key(), "route", r.GetName(), defined)...)
		}
		for _, s := range raw.Secrets {
			out = append(out, c.clash(f.Key(), "secret", s.GetName(), defined)...)
		}
		if len(raw.Secrets) > 0 && len(f.Grant) == 0 {
			out = append(out, sources.Problem{Key: f.Key() + ".grant", Warning: true,
				Err: fmt.Errorf("the file defines %d secrets and grants them to no scope: no node receives them", len(raw.Secrets))})
		}
	}
	for i, l := range c.ListenerSet {
		for _, s := range l.Secrets {
			if !defined["secret"][s] {
				out = append(out, sources.Problem{Key: fmt.Sprintf("listeners[%d].tls", i), Warning: true,
					Err: fmt.Errorf("no secret %q is defined (secrets, resources): the listener never finishes warming", s)})
			}
		}
		if r := l.RouteConfig; r != "" && !defined["route"][r] {
			out = append(out, sources.Problem{Key: fmt.Sprintf("listeners[%d].http.route_config", i), Warning: true,
				Err: fmt.Errorf("no route configuration %q is defined (routes, resources): the listener never finishes warming", r)})
		}
	}
	return out
}

// clash is the problem of a resource file defining a name of kind that
// something else defines already, if it does; it records the name.
func (c *Config) clash(key, kind, name string, defined map[string]map[string]bool) []sources.Problem {
	if defined[kind][name] {
		return []sources.Problem{{Key: key + ".file", Err: fmt.Errorf("%s %q is defined elsewhere too", kind, name)}}
	}
	defined[kind][name] = true
	return nil
}

// problem is a *settings.KeyError as a Problem of its key.
func problem(err error) sources.Problem {
	if ke, ok := errors.AsType[*settings.KeyError](err); ok {
		return sources.Problem{Key: ke.Key, Err: ke.Err}
	}
	return sources.Problem{Err: err}
}
