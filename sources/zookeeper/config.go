package zookeeper

import (
	"fmt"
	"net"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/settings"
)

// Defaults of Config, in one place.
const (
	DefaultSessionTimeout = 30 * time.Second
	DefaultRetryMin       = 250 * time.Millisecond
	DefaultRetryMax       = 30 * time.Second
	defaultPort           = "2181"
)

// Config is the source's configuration; the package doc lists the keys.
type Config struct {
	Servers        []string      `mapstructure:"servers"`
	Chroot         string        `mapstructure:"chroot"`
	SessionTimeout time.Duration `mapstructure:"session_timeout"`
	Auth           Auth          `mapstructure:"auth"`
	TLS            TLS           `mapstructure:"tls"`
	RetryMin       time.Duration `mapstructure:"retry_min"`
	RetryMax       time.Duration `mapstructure:"retry_max"`
	Services       []Service     `mapstructure:"services"`
}

// Auth is the digest identity the source authenticates as.
type Auth struct {
	User         string `mapstructure:"user"`
	PasswordFile string `mapstructure:"password_file"`
}

// TLS configures connections to ZooKeeper's secure client port.
type TLS struct {
	CAFile     string `mapstructure:"ca_file"`
	CertFile   string `mapstructure:"cert_file"`
	KeyFile    string `mapstructure:"key_file"`
	ServerName string `mapstructure:"server_name"`
}

func (t TLS) set() bool { return t != TLS{} }

// Service is one `services` entry: a znode path and the format of what
// the registrar writes under it.
type Service struct {
	Path   string `mapstructure:"path"`
	Format string `mapstructure:"format"`
	// Cluster names the one service of a serverset or nerve path
	// (default: the path's last element).
	Cluster string `mapstructure:"cluster"`
	// Endpoint picks a named additional endpoint of serverset members
	// instead of their serviceEndpoint.
	Endpoint string `mapstructure:"endpoint"`
}

func defaults() Config {
	return Config{SessionTimeout: DefaultSessionTimeout, RetryMin: DefaultRetryMin, RetryMax: DefaultRetryMax}
}

// validate reports the first invalid key, and completes the servers'
// ports and the flat entries' cluster names.
func (c *Config) validate() error {
	if len(c.Servers) == 0 {
		return settings.Errorf("servers", "is required (host:port of each ZooKeeper server)")
	}
	for i, s := range c.Servers {
		full, err := hostPort(s)
		if err != nil {
			return settings.Errorf(fmt.Sprintf("servers[%d]", i), "%q: %v", s, err)
		}
		c.Servers[i] = full
	}
	if c.Chroot != "" {
		if err := checkPath(c.Chroot); err != nil {
			return settings.Errorf("chroot", "%v", err)
		}
		if c.Chroot == "/" {
			c.Chroot = ""
		}
	}
	switch {
	case c.SessionTimeout < time.Second || c.SessionTimeout > time.Hour:
		return settings.Errorf("session_timeout", "%s is outside 1s..1h", c.SessionTimeout)
	case c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return settings.Errorf("retry_max", "retry_min (%v) must be positive and at most retry_max (%v)", c.RetryMin, c.RetryMax)
	case (c.Auth.User == "") != (c.Auth.PasswordFile == ""):
		key := "auth.password_file"
		if c.Auth.User == "" {
			key = "auth.user"
		}
		return settings.Errorf(key, "is required with auth.user and auth.password_file together")
	case strings.Contains(c.Auth.User, ":"):
		return settings.Errorf("auth.user", "%q contains a colon, which digest authentication cannot carry", c.Auth.User)
	case (c.TLS.CertFile == "") != (c.TLS.KeyFile == ""):
		key := "tls.key_file"
		if c.TLS.CertFile == "" {
			key = "tls.cert_file"
		}
		return settings.Errorf(key, "is required with tls.cert_file and tls.key_file together")
	case len(c.Services) == 0:
		return settings.Errorf("services", "is required (a path and a format per entry)")
	}
	paths, clusters := map[string]int{}, map[string]int{}
	for i := range c.Services {
		if err := c.Services[i].validate(); err != nil {
			return settings.Prefix(fmt.Sprintf("services[%d]", i), err)
		}
		s := c.Services[i]
		for p, j := range paths {
			if p == s.Path || within(s.Path, p) || within(p, s.Path) {
				return settings.Errorf(fmt.Sprintf("services[%d].path", i), "%s overlaps services[%d].path %s (one tree per entry)", s.Path, j, p)
			}
		}
		paths[s.Path] = i
		if s.Cluster != "" {
			if j, dup := clusters[s.Cluster]; dup {
				return settings.Errorf(fmt.Sprintf("services[%d].cluster", i), "%s is fed by services[%d] already", s.Cluster, j)
			}
			clusters[s.Cluster] = i
		}
	}
	return nil
}

func (s *Service) validate() error {
	f, ok := formats[s.Format]
	switch {
	case s.Format == "":
		return settings.Errorf("format", "is required (one of %s)", formatNames())
	case !ok:
		return settings.Errorf("format", "%q is not one of %s", s.Format, formatNames())
	case s.Path == "":
		return settings.Errorf("path", "is required")
	}
	if err := checkPath(s.Path); err != nil {
		return settings.Errorf("path", "%v", err)
	}
	switch {
	case f.tree && s.Cluster != "":
		return settings.Errorf("cluster", "does not apply to format %s: each service under the path is a cluster of its own name", s.Format)
	case s.Endpoint != "" && s.Format != "serverset":
		return settings.Errorf("endpoint", "applies to format serverset only")
	case !f.tree && s.Cluster == "":
		s.Cluster = path.Base(s.Path)
		if s.Cluster == "/" {
			return settings.Errorf("cluster", "is required for path /")
		}
	}
	return nil
}

// checkPath accepts what ZooKeeper accepts as a znode path: absolute, no
// empty, "." or ".." element, no trailing slash but for the root.
func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%q is not absolute (want /like/this)", p)
	}
	if p == "/" {
		return nil
	}
	for el := range strings.SplitSeq(p[1:], "/") {
		if el == "" || el == "." || el == ".." || strings.ContainsRune(el, 0) {
			return fmt.Errorf("%q is not a znode path (empty, \".\" or \"..\" element, or a trailing slash)", p)
		}
	}
	return nil
}

// within reports whether znode p is below dir.
func within(p, dir string) bool {
	return dir == "/" || strings.HasPrefix(p, dir+"/")
}

// hostPort checks host[:port] and adds the default port.
func hostPort(s string) (string, error) {
	if s == "" || strings.ContainsAny(s, "/ ") {
		return "", fmt.Errorf("not host:port")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return net.JoinHostPort(strings.Trim(s, "[]"), defaultPort), nil
		}
		return "", err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return "", fmt.Errorf("not host:port with a port in 1..65535")
	}
	return s, nil
}

// resolve makes the configured file paths absolute against dir.
func (c *Config) resolve(dir string) {
	for _, p := range []*string{&c.Auth.PasswordFile, &c.TLS.CAFile, &c.TLS.CertFile, &c.TLS.KeyFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// znode returns the server-side path of p: under the chroot, if any.
func (c *Config) znode(p string) string {
	if c.Chroot == "" {
		return p
	}
	if p == "/" {
		return c.Chroot
	}
	return c.Chroot + p
}
