package http

import (
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources/file"
	"github.com/xdsbridge/xdsbridge/sources/tlsclient"
)

// Defaults of Config.
const (
	DefaultInterval     = 30 * time.Second
	DefaultTimeout      = 10 * time.Second
	DefaultMaxBodyBytes = 10 << 20
	// maxMaxBodyBytes bounds max_body_bytes: the body is held in memory
	// whole while it is parsed.
	maxMaxBodyBytes = 1 << 30
)

// Config is the source's configuration; see the package doc for the keys.
type Config struct {
	URL             string          `mapstructure:"url"`
	Interval        time.Duration   `mapstructure:"interval"`
	Timeout         time.Duration   `mapstructure:"timeout"`
	MaxBodyBytes    int64           `mapstructure:"max_body_bytes"`
	BearerTokenFile string          `mapstructure:"bearer_token_file"`
	TLS             tlsclient.Files `mapstructure:"tls"`
	// Schema holds format, service_label and default_service, as the file
	// source has them.
	file.Schema `mapstructure:",squash"`
}

// defaults returns the configuration before the user's keys apply.
func defaults() Config {
	return Config{Interval: DefaultInterval, Timeout: DefaultTimeout, MaxBodyBytes: DefaultMaxBodyBytes}
}

// validate reports the first invalid key and returns the parsed URL.
func (c Config) validate() (*url.URL, error) {
	if strings.TrimSpace(c.URL) == "" {
		return nil, settings.Errorf("url", "is required")
	}
	u, err := scalar.URL(c.URL)
	switch {
	case !strings.Contains(c.URL, "://"):
		return nil, settings.Errorf("url", "%q has no scheme (want http:// or https://, such as http://%s)", c.URL, c.URL)
	case err != nil:
		return nil, settings.Errorf("url", "%q is not a URL: %v", c.URL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, settings.Errorf("url", "scheme %q is not http or https", u.Scheme)
	case u.Host == "":
		return nil, settings.Errorf("url", "%q has no host", c.URL)
	case u.User != nil:
		return nil, settings.Errorf("url", "credentials in the URL are not accepted; use bearer_token_file")
	case c.Interval <= 0:
		return nil, settings.Errorf("interval", "must be positive, not %s", c.Interval)
	case c.Timeout <= 0:
		return nil, settings.Errorf("timeout", "must be positive, not %s", c.Timeout)
	case c.MaxBodyBytes < 1 || c.MaxBodyBytes > maxMaxBodyBytes:
		return nil, settings.Errorf("max_body_bytes", "%d is outside 1..%d", c.MaxBodyBytes, maxMaxBodyBytes)
	case c.TLS.Set() && u.Scheme != "https":
		return nil, settings.Errorf("tls", "applies to https URLs only (url is %s)", u.Scheme)
	}
	if err := c.TLS.Validate(); err != nil {
		return nil, err
	}
	if err := c.Schema.Validate(); err != nil {
		return nil, err
	}
	return u, nil
}

// resolve makes the configured file paths absolute against dir.
func (c *Config) resolve(dir string) {
	if c.BearerTokenFile != "" && !filepath.IsAbs(c.BearerTokenFile) {
		c.BearerTokenFile = filepath.Join(dir, c.BearerTokenFile)
	}
	c.TLS.Resolve(dir)
}
