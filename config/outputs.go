package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/xdsbridge/xdsbridge/settings"
)

// REST configures REST-JSON polling of the xDS resources (xds.rest).
type REST struct {
	Enabled bool `mapstructure:"enabled"`
	// Listen is "admin" (serve on the admin listener) or an address of its
	// own.
	Listen string `mapstructure:"listen"`
	// RefreshDelay is the polling interval written into the EDS config
	// source of the clusters served to pollers.
	RefreshDelay    time.Duration `mapstructure:"refresh_delay"`
	MaxRequestBytes int64         `mapstructure:"max_request_bytes"`
}

// RESTOnAdmin is the xds.rest.listen value that serves REST on the admin
// listener.
const RESTOnAdmin = "admin"

// Output is one entry of the outputs list: a further delivery of the xDS
// resources. The only type is "files" (watched files for Envoy's
// path_config_source).
type Output struct {
	Type string `mapstructure:"type"`
	// Dir is where the files go (created if missing); relative to the
	// configuration file.
	Dir string `mapstructure:"dir"`
	// EnvoyDir is Dir as the Envoys see it; default Dir.
	EnvoyDir string `mapstructure:"envoy_dir"`
	// Types are the resource types written: cds and eds (default both),
	// or eds alone.
	Types []string `mapstructure:"types"`
}

// outputDefaults are the defaults of an outputs entry's keys, applied by
// Validate (viper's defaults do not reach into lists).
var outputDefaults = Output{Types: []string{"cds", "eds"}}

// CDS reports whether the output writes clusters.
func (o Output) CDS() bool { return slices.Contains(o.Types, "cds") }

// validateOutputs fills in defaults, makes directories absolute and checks
// each entry. Unlike the rest of validation it looks at the disk: a dir
// that is (or lies under) a file is a configuration error, caught by
// `bridge validate` too; a missing dir is fine (the bridge creates it),
// and writability is checked when the bridge starts.
func (c *Config) validateOutputs() error {
	for i := range c.Outputs {
		o := &c.Outputs[i]
		key := fmt.Sprintf("outputs[%d]", i)
		if o.Type != "files" {
			return settings.Errorf(key+".type", "unknown output type %q (known: files)", o.Type)
		}
		if o.Dir == "" {
			return settings.Errorf(key+".dir", "is required")
		}
		if !filepath.IsAbs(o.Dir) {
			o.Dir = filepath.Join(c.Dir, o.Dir)
		}
		if err := checkDir(o.Dir); err != nil {
			return settings.Prefix(key+".dir", err)
		}
		if o.EnvoyDir == "" {
			o.EnvoyDir = o.Dir
		} else if !filepath.IsAbs(o.EnvoyDir) {
			return settings.Errorf(key+".envoy_dir", "%q is not an absolute path", o.EnvoyDir)
		}
		if len(o.Types) == 0 {
			o.Types = slices.Clone(outputDefaults.Types)
		}
		for j, t := range o.Types {
			if t != "cds" && t != "eds" {
				return settings.Errorf(fmt.Sprintf("%s.types[%d]", key, j), "unknown type %q (known: cds, eds)", t)
			}
		}
		if !slices.Contains(o.Types, "eds") {
			return settings.Errorf(key+".types", "must include eds: the clusters written name the EDS files")
		}
		for _, p := range c.Outputs[:i] {
			if p.Dir == o.Dir {
				return settings.Errorf(key+".dir", "%s is already the directory of another output", o.Dir)
			}
		}
	}
	return nil
}

// validateREST checks the xds.rest and xds.config_cluster keys.
func (c *Config) validateREST() error {
	if c.XDS.ConfigCluster == "" {
		return settings.Errorf("xds.config_cluster", "must not be empty")
	}
	r := c.XDS.REST
	if r.Listen != RESTOnAdmin {
		if err := checkListen("xds.rest.listen", r.Listen); err != nil {
			return err
		}
	}
	if r.RefreshDelay <= 0 {
		return settings.Errorf("xds.rest.refresh_delay", "must be a positive duration, not %s", r.RefreshDelay)
	}
	if r.MaxRequestBytes < 1024 {
		return settings.Errorf("xds.rest.max_request_bytes", "must be at least 1024, not %d", r.MaxRequestBytes)
	}
	return nil
}

// checkDir reports an error if dir, or its nearest existing ancestor, is
// not a directory.
func checkDir(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return nil
		case err == nil:
			return fmt.Errorf("%s is not a directory", p)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		case filepath.Dir(p) == p:
			return nil
		}
	}
}
