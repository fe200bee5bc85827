package etcd

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources/tlsclient"
)

// Defaults of Config, in one place.
const (
	// DefaultEndpoint is etcd's own default client address; its scheme
	// is https when a tls block is set, else http.
	DefaultEndpoint         = "127.0.0.1:2379"
	DefaultDialTimeout      = 5 * time.Second
	DefaultRequestTimeout   = 10 * time.Second
	DefaultKeepaliveTime    = 30 * time.Second
	DefaultKeepaliveTimeout = 10 * time.Second
	DefaultRetryMin         = 250 * time.Millisecond
	DefaultRetryMax         = 30 * time.Second
)

// Config is the source's configuration; the package doc lists the keys.
type Config struct {
	Endpoints        []string        `mapstructure:"endpoints"`
	Auth             Auth            `mapstructure:"auth"`
	TLS              tlsclient.Files `mapstructure:"tls"`
	DialTimeout      time.Duration   `mapstructure:"dial_timeout"`
	RequestTimeout   time.Duration   `mapstructure:"request_timeout"`
	KeepaliveTime    time.Duration   `mapstructure:"keepalive_time"`
	KeepaliveTimeout time.Duration   `mapstructure:"keepalive_timeout"`
	RetryMin         time.Duration   `mapstructure:"retry_min"`
	RetryMax         time.Duration   `mapstructure:"retry_max"`
	Services         []Entry         `mapstructure:"services"`
}

// Auth is the etcd user the source authenticates as. The password is
// read from PasswordFile at every connection, so that a rotated one is
// used from the next connection on; it is never logged.
type Auth struct {
	User         string `mapstructure:"user"`
	PasswordFile string `mapstructure:"password_file"`
}

// Entry is one `services` entry: a key prefix and the format of what the
// registrar writes under it.
type Entry struct {
	// Prefix is the key prefix watched; a trailing slash is added when
	// missing, so that "services/web" does not also take
	// "services/webhooks/...".
	Prefix string `mapstructure:"prefix"`
	// Format is one of the formats (see formats).
	Format string `mapstructure:"format"`
	// Cluster, when set, names the one service that every instance under
	// Prefix belongs to; it is served even while it has no instance.
	// Empty: each key's service is named by its path (see the package
	// doc).
	Cluster string `mapstructure:"cluster"`
}

func defaults() Config {
	return Config{
		DialTimeout:      DefaultDialTimeout,
		RequestTimeout:   DefaultRequestTimeout,
		KeepaliveTime:    DefaultKeepaliveTime,
		KeepaliveTimeout: DefaultKeepaliveTimeout,
		RetryMin:         DefaultRetryMin,
		RetryMax:         DefaultRetryMax,
	}
}

// validate reports the first invalid key, and completes what is derived:
// the endpoints' scheme and the prefixes' trailing slash.
func (c *Config) validate() error {
	if len(c.Endpoints) == 0 {
		c.Endpoints = []string{DefaultEndpoint}
	}
	for i, ep := range c.Endpoints {
		full, err := endpointURL(ep, c.TLS.Set())
		if err != nil {
			return settings.Errorf(fmt.Sprintf("endpoints[%d]", i), "%q: %v", ep, err)
		}
		if c.TLS.Set() && strings.HasPrefix(full, "http://") {
			return settings.Errorf("tls", "applies to https endpoints only (endpoints[%d] is %s)", i, full)
		}
		c.Endpoints[i] = full
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	positive := []struct {
		key string
		d   time.Duration
	}{{"dial_timeout", c.DialTimeout}, {"request_timeout", c.RequestTimeout},
		{"keepalive_timeout", c.KeepaliveTimeout}, {"retry_min", c.RetryMin}}
	for _, p := range positive {
		if p.d <= 0 {
			return settings.Errorf(p.key, "must be positive, not %s", p.d)
		}
	}
	switch {
	case c.KeepaliveTime < 5*time.Second:
		// etcd's default --grpc-keepalive-min-time: a client pinging more
		// often is sent GOAWAY "too_many_pings" and loses its watches.
		return settings.Errorf("keepalive_time", "%s is below 5s, etcd's least keepalive interval by default", c.KeepaliveTime)
	case c.RetryMax < c.RetryMin:
		return settings.Errorf("retry_max", "%s is less than retry_min (%s)", c.RetryMax, c.RetryMin)
	case (c.Auth.User == "") != (c.Auth.PasswordFile == ""):
		key := "auth.password_file"
		if c.Auth.User == "" {
			key = "auth.user"
		}
		return settings.Errorf(key, "is required with auth.user and auth.password_file together")
	case len(c.Services) == 0:
		return settings.Errorf("services", "is required (a prefix and a format per entry)")
	}
	clusters := map[string]int{}
	for i := range c.Services {
		key := fmt.Sprintf("services[%d]", i)
		if err := c.Services[i].validate(); err != nil {
			return settings.Prefix(key, err)
		}
		s := c.Services[i]
		for j, o := range c.Services[:i] {
			if strings.HasPrefix(s.Prefix, o.Prefix) || strings.HasPrefix(o.Prefix, s.Prefix) {
				return settings.Errorf(key+".prefix", "%q overlaps services[%d].prefix %q (a key belongs to one entry)", s.Prefix, j, o.Prefix)
			}
		}
		if s.Cluster != "" {
			if j, dup := clusters[s.Cluster]; dup {
				return settings.Errorf(key+".cluster", "%q is fed by services[%d] already", s.Cluster, j)
			}
			clusters[s.Cluster] = i
		}
	}
	return nil
}

func (e *Entry) validate() error {
	f, ok := formats[e.Format]
	switch {
	case e.Format == "":
		return settings.Errorf("format", "is required (one of %s)", formatNames())
	case !ok:
		return settings.Errorf("format", "%q is not one of %s", e.Format, formatNames())
	case e.Prefix == "" || e.Prefix == "/":
		return settings.Errorf("prefix", "is required (not the whole key space)")
	case e.Cluster != "" && strings.TrimSpace(e.Cluster) != e.Cluster:
		return settings.Errorf("cluster", "%q has leading or trailing spaces", e.Cluster)
	}
	if !strings.HasSuffix(e.Prefix, "/") {
		e.Prefix += "/"
	}
	if f.checkPrefix != nil {
		if err := f.checkPrefix(e.Prefix); err != nil {
			return settings.Errorf("prefix", "%q: %v", e.Prefix, err)
		}
	}
	return nil
}

// endpointURL checks one etcd endpoint and gives it a scheme: https when
// a tls block is set, else http.
func endpointURL(ep string, tls bool) (string, error) {
	if !strings.Contains(ep, "://") {
		scheme := "http"
		if tls {
			scheme = "https"
		}
		ep = scheme + "://" + ep
	}
	u, err := url.Parse(ep)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("scheme %q is not http or https", u.Scheme)
	case u.User != nil:
		return "", fmt.Errorf("credentials in the URL are not accepted; use auth")
	case u.Path != "" && u.Path != "/", u.RawQuery != "":
		return "", fmt.Errorf("want scheme://host:port and nothing more")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("not host:port: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return "", fmt.Errorf("not host:port with a port in 1..65535")
	}
	return u.Scheme + "://" + u.Host, nil
}

// resolve makes the configured file paths absolute against dir.
func (c *Config) resolve(dir string) {
	if c.Auth.PasswordFile != "" && !filepath.IsAbs(c.Auth.PasswordFile) {
		c.Auth.PasswordFile = filepath.Join(dir, c.Auth.PasswordFile)
	}
	c.TLS.Resolve(dir)
}
