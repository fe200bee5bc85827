package config

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// minResponseBytes is the smallest xds.max_response_bytes: a response must
// hold at least one typical resource besides its envelope.
const minResponseBytes = 64 << 10

// minReturnAfterQuiet is the shortest memory.return_after_quiet: the
// policy samples four times per quiet period, and much shorter periods
// are not quiet, only gaps between a burst's writes.
const minReturnAfterQuiet = 100 * time.Millisecond

// Validate checks every setting and returns every mistake it finds, joined
// (settings.Split), each a *settings.KeyError naming its key; a section
// with one mistake may hide a second behind it. It also builds each source
// with its type's constructor (which does no I/O) so that source-specific
// settings are checked too.
func (c *Config) Validate() error {
	errs := []error{
		checkListen("xds.listen", c.XDS.Listen),
		checkListen("admin.listen", c.Admin.Listen),
	}
	// A list, not a map, so that the mistakes come in the same order.
	for _, d := range []struct {
		key string
		val time.Duration
	}{
		{"xds.unknown_name_wait", c.XDS.UnknownNameWait},
		{"xds.keepalive.time", c.XDS.Keepalive.Time},
		{"xds.keepalive.timeout", c.XDS.Keepalive.Timeout},
		{"xds.keepalive.min_client_interval", c.XDS.Keepalive.MinClientInterval},
		{"holdoff.min", c.Holdoff.Min},
		{"holdoff.max", c.Holdoff.Max},
	} {
		if d.val <= 0 {
			errs = append(errs, settings.Errorf(d.key, "must be a positive duration, not %s", d.val))
		}
	}
	if d := c.Memory.ReturnAfterQuiet; d != 0 && d < minReturnAfterQuiet {
		errs = append(errs, settings.Errorf("memory.return_after_quiet", "must be at least %s, or 0 (never), not %s", minReturnAfterQuiet, d))
	}
	if n := c.XDS.MaxResponseBytes; n < minResponseBytes || n > math.MaxInt32 {
		errs = append(errs, settings.Errorf("xds.max_response_bytes", "%d is out of range (%d to %d)", n, minResponseBytes, math.MaxInt32))
	} else if n := c.XDS.SendBudgetBytes; n < c.XDS.MaxResponseBytes {
		errs = append(errs, settings.Errorf("xds.send_budget_bytes", "%d is less than xds.max_response_bytes (%d)", n, c.XDS.MaxResponseBytes))
	}
	// Limits first: a budget below the largest request would admit such a
	// request only alone, which is allowed but never what was meant.
	if err := c.XDS.Limits.validate(); err != nil {
		errs = append(errs, err)
	} else if n := c.XDS.RequestBudgetBytes; n < c.XDS.Limits.RequestBytes {
		errs = append(errs, settings.Errorf("xds.request_budget_bytes", "%d is less than xds.limits.request_bytes (%d)", n, c.XDS.Limits.RequestBytes))
	}
	errs = append(errs, c.Guard.check("guard"))
	if c.Holdoff.Min > 0 && c.Holdoff.Max < c.Holdoff.Min {
		errs = append(errs, settings.Errorf("holdoff.max", "%s is shorter than holdoff.min (%s)", c.Holdoff.Max, c.Holdoff.Min))
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		errs = append(errs, settings.Prefix("log.level", err))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		errs = append(errs, settings.Errorf("log.format", "unknown format %q (want text or json)", c.Log.Format))
	}
	errs = append(errs, c.validateREST())
	// Collisions are only worth checking between addresses that parse.
	if errors.Join(errs[:2]...) == nil {
		errs = append(errs, c.checkCollisions())
	}
	errs = append(errs,
		c.validateOutputs(),
		c.validateSecurity(),
		c.validateSources(),
		c.validateScopes(),
		c.validateShaping(),
		c.validateEnvoy(),
		c.validateIstio(),
		c.validateMerge(),
	)
	return errors.Join(errs...)
}

// validateSources checks every entry: its name, its type, and its type's
// own settings.
func (c *Config) validateSources() error {
	if len(c.Entries) == 0 {
		return settings.Errorf("sources", "at least one source is required")
	}
	var errs []error
	seen := map[string]bool{}
	for _, s := range c.Entries {
		switch {
		case s.Name == "":
			errs = append(errs, settings.Errorf(s.Key()+".name", "is required"))
		case seen[s.Name]:
			errs = append(errs, settings.Errorf(s.Key()+".name", "duplicate source name %q", s.Name))
		case s.Type == "":
			errs = append(errs, settings.Errorf(s.Key()+".type", "is required"))
		default:
			seen[s.Name] = true
			opts := sources.Options{Logger: slog.New(slog.DiscardHandler), Status: sources.NewStatus(s.Name)}
			if _, err := c.NewSource(s, opts); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ParseLevel parses a log level name: debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown level %q (want debug, info, warn or error)", s)
}
