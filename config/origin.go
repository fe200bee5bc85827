package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/xdsbridge/xdsbridge/settings"
)

// Error is an invalid configuration as Load reports it: every mistake
// found, each saying where its value came from, the file with the line and
// column of the key, or an environment variable or a flag. One mistake
// takes one line:
//
//	invalid configuration bridge.yaml:4:8: holdoff.min: 100 is not a duration: durations need a unit such as 100ms or 30s
//	invalid configuration from environment variable BRIDGE_LOG_LEVEL: log.level: unknown level "verbose" (want debug, info, warn or error)
//
// several take a line each under a count, at most maxReported of them.
//
// Err joins the mistakes (settings.Split), usually *settings.KeyError
// values naming the key; a KeyError's Origin, when set, is where the value
// came from.
type Error struct {
	File string
	Err  error
	// at is where each key is written in File.
	at positions
}

// maxReported bounds the mistakes an Error lists: past a few dozen, the
// rest follow from the first ones more often than not.
const maxReported = 20

func (e *Error) Error() string {
	// In the file's order; what came from elsewhere first.
	errs := settings.Split(e.Err)
	slices.SortStableFunc(errs, func(a, b error) int {
		pa, pb := e.where(a), e.where(b)
		return cmp.Or(cmp.Compare(pa.line, pb.line), cmp.Compare(pa.column, pb.column))
	})
	var lines []string
	seen := map[string]bool{}
	for _, err := range errs {
		if l := e.line(err); !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	if len(lines) == 1 {
		return "invalid configuration " + lines[0]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration %s: %d errors:", e.File, len(lines))
	for i, l := range lines {
		if i == maxReported {
			fmt.Fprintf(&b, "\n  ... and %d more", len(lines)-i)
			break
		}
		b.WriteString("\n  " + l)
	}
	return b.String()
}

// where returns the position in the file of the value err is about: the
// zero position when it has none there (it came from the environment, a
// flag, or the file as a whole).
func (e *Error) where(err error) position {
	var ke *settings.KeyError
	var se *SyntaxError
	switch {
	case errors.As(err, &ke) && ke.Origin == "" && ke.Key != "":
		pos, _ := e.at.of(ke.Key)
		return pos
	case errors.As(err, &se):
		return position{line: se.Line}
	}
	return position{}
}

// line words one mistake, starting with where its value came from.
func (e *Error) line(err error) string {
	var ke *settings.KeyError
	if errors.As(err, &ke) && ke.Origin != "" {
		return fmt.Sprintf("from %s: %v", ke.Origin, err)
	}
	switch pos := e.where(err); {
	case pos.column > 0:
		return fmt.Sprintf("%s:%d:%d: %v", e.File, pos.line, pos.column, err)
	case pos.line > 0:
		return fmt.Sprintf("%s:%d: %v", e.File, pos.line, err)
	}
	return fmt.Sprintf("%s: %v", e.File, err)
}

func (e *Error) Unwrap() error { return e.Err }

// envPrefix starts the name of every environment variable that overrides
// a setting: BRIDGE_ and the key in capitals, underscores for dots.
const envPrefix = "BRIDGE_"

func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// origins maps every setting whose value comes from a set flag or a
// non-empty environment variable (viper ignores empty ones) to where it
// comes from, as KeyError.Origin words it; the file's settings are absent.
func origins(fs *pflag.FlagSet) map[string]string {
	out := map[string]string{}
	for key := range defaults {
		if os.Getenv(envName(key)) != "" {
			out[key] = "environment variable " + envName(key)
		}
	}
	for flag, key := range Flags {
		if f := lookupFlag(fs, flag); f != nil && f.Changed {
			out[key] = "flag --" + flag
		}
	}
	return out
}

func lookupFlag(fs *pflag.FlagSet, name string) *pflag.Flag {
	if fs == nil {
		return nil
	}
	return fs.Lookup(name)
}

// unknownEnv returns a warning for every BRIDGE_ variable of environ (as
// os.Environ has it) that names no setting, naming the closest one: a
// misspelled override is otherwise silently ignored. The warnings are
// sorted by variable name.
func unknownEnv(environ []string) []string {
	known := make([]string, 0, len(defaults))
	for key := range defaults {
		known = append(known, envName(key))
	}
	slices.Sort(known)
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || slices.Contains(known, name) {
			continue
		}
		out = append(out, fmt.Sprintf("environment variable %s is not a setting and is ignored (did you mean %s?)",
			name, nearest(name, known)))
	}
	slices.Sort(out)
	return out
}

// originOf returns where the value of key came from, for
// settings.Attribute: "" for the file.
func (c *Config) originOf(key string) string { return c.origins[key] }

// nearest is the candidate closest to name (settings.Closest).
func nearest(name string, candidates []string) string {
	c, _ := settings.Closest(name, candidates)
	return c
}
