package config

import (
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/settings"
)

// GuardDefaults are the removal guard settings every source gets unless its
// own `guard` entry overrides them; manager.Guard explains the rules they
// set.
type GuardDefaults struct {
	Hold               time.Duration `mapstructure:"hold"`
	MaxRemovedFraction float64       `mapstructure:"max_removed_fraction"`
	MinRemoved         int           `mapstructure:"min_removed"`
	PerService         bool          `mapstructure:"per_service"`
}

// management is what a sources entry says about how the manager runs the
// source, its startup and its removal guard, besides its type's own
// settings.
type management struct {
	Startup struct {
		Timeout  time.Duration `mapstructure:"timeout"`
		Required bool          `mapstructure:"required"`
	} `mapstructure:"startup"`
	Guard struct {
		Enabled       bool `mapstructure:"enabled"`
		GuardDefaults `mapstructure:",squash"`
	} `mapstructure:"guard"`
}

// managementKeys are the keys of a sources entry that management reads.
var managementKeys = map[string]bool{"startup": true, "guard": true}

// defaultManagement is what an entry without startup and guard keys gets:
// the default startup, and the guard section's settings.
func defaultManagement(guard GuardDefaults) management {
	var m management
	m.Startup.Timeout = manager.DefaultStartupTimeout
	m.Guard.Enabled = true
	m.Guard.GuardDefaults = guard
	return m
}

// parseManagement fills s.Startup and s.Guard from the entry's management
// keys (raw), starting from the defaults.
func (c *Config) parseManagement(s *Source, raw map[string]any) error {
	// A bad default is named as such (by Validate), not as every
	// source's setting.
	if c.Guard.check("guard") != nil {
		return nil
	}
	p := defaultManagement(c.Guard)
	if err := settings.Decode(raw, &p); err != nil {
		return settings.Prefix(s.Key(), err)
	}
	s.Startup = manager.Startup{Timeout: p.Startup.Timeout, Required: p.Startup.Required}
	if p.Guard.Enabled {
		g := p.Guard.GuardDefaults
		s.Guard = manager.Guard{Hold: g.Hold, MaxRemovedFraction: g.MaxRemovedFraction, MinRemoved: g.MinRemoved, PerService: g.PerService}
	}
	switch {
	case p.Startup.Timeout <= 0:
		return settings.Errorf(s.Key()+".startup.timeout", "must be a positive duration, not %s", p.Startup.Timeout)
	case p.Guard.Enabled:
		return p.Guard.check(s.Key() + ".guard")
	}
	return nil
}

// check validates guard settings under key.
func (g GuardDefaults) check(key string) error {
	switch {
	case g.Hold <= 0:
		return settings.Errorf(key+".hold", "must be a positive duration, not %s", g.Hold)
	case !(g.MaxRemovedFraction > 0 && g.MaxRemovedFraction <= 1):
		return settings.Errorf(key+".max_removed_fraction", "must be in (0, 1], not %v", g.MaxRemovedFraction)
	case g.MinRemoved < 1:
		return settings.Errorf(key+".min_removed", "must be at least 1, not %d", g.MinRemoved)
	}
	return nil
}
