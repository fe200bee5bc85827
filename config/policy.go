package config

import (
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// GuardDefaults are the removal guard settings every source gets unless its
// own `guard` entry overrides them (see sources.Guard).
type GuardDefaults struct {
	MaxRemovedFraction float64       `mapstructure:"max_removed_fraction"`
	Hold               time.Duration `mapstructure:"hold"`
}

// sourcePolicy is what a sources entry may say about its startup and
// removal guard, besides its type's own settings.
type sourcePolicy struct {
	Startup struct {
		Timeout  time.Duration `mapstructure:"timeout"`
		Required bool          `mapstructure:"required"`
	} `mapstructure:"startup"`
	Guard struct {
		Enabled            bool          `mapstructure:"enabled"`
		MaxRemovedFraction float64       `mapstructure:"max_removed_fraction"`
		Hold               time.Duration `mapstructure:"hold"`
	} `mapstructure:"guard"`
}

// policyKeys are the keys of a sources entry that sourcePolicy reads.
var policyKeys = map[string]bool{"startup": true, "guard": true}

// parsePolicy fills s.Startup and s.Guard from the entry's policy keys
// (raw), starting from the defaults.
func (c *Config) parsePolicy(s *Source, raw map[string]any) error {
	// The defaults are checked first, so that a bad one is named as such
	// rather than as the first source's setting.
	if err := checkGuard("guard", c.Guard.MaxRemovedFraction, c.Guard.Hold); err != nil {
		return err
	}
	var p sourcePolicy
	p.Startup.Timeout = sources.DefaultStartupTimeout
	p.Guard.Enabled = true
	p.Guard.MaxRemovedFraction = c.Guard.MaxRemovedFraction
	p.Guard.Hold = c.Guard.Hold
	if err := sources.Decode(raw, &p); err != nil {
		return sources.Prefix(s.Key(), err)
	}
	s.Startup = sources.Startup{Timeout: p.Startup.Timeout, Required: p.Startup.Required}
	if p.Guard.Enabled {
		s.Guard = sources.Guard{MaxRemovedFraction: p.Guard.MaxRemovedFraction, Hold: p.Guard.Hold}
	}
	switch {
	case p.Startup.Timeout <= 0:
		return sources.Errorf(s.Key()+".startup.timeout", "must be a positive duration, not %s", p.Startup.Timeout)
	case p.Guard.Enabled:
		return checkGuard(s.Key()+".guard", p.Guard.MaxRemovedFraction, p.Guard.Hold)
	}
	return nil
}

// checkGuard validates guard settings under key.
func checkGuard(key string, fraction float64, hold time.Duration) error {
	if !(fraction > 0 && fraction <= 1) {
		return sources.Errorf(key+".max_removed_fraction", "must be in (0, 1], not %v", fraction)
	}
	if hold <= 0 {
		return sources.Errorf(key+".hold", "must be a positive duration, not %s", hold)
	}
	return nil
}
