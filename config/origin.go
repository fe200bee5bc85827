package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/xdsbridge/xdsbridge/settings"
)

// Error is an invalid configuration as Load reports it, in one line that
// says where the offending value came from: the file, or, when the value
// came from there, an environment variable or a flag:
//
//	invalid configuration bridge.yaml: holdoff.min: 100 is not a duration: durations need a unit such as 100ms or 30s
//	invalid configuration from environment variable BRIDGE_LOG_LEVEL: log.level: unknown level "verbose" (want debug, info, warn or error)
//
// Err is usually a *settings.KeyError naming the key; its Origin, when set,
// is where the value came from.
type Error struct {
	File string
	Err  error
}

func (e *Error) Error() string {
	var ke *settings.KeyError
	if errors.As(e.Err, &ke) && ke.Origin != "" {
		return fmt.Sprintf("invalid configuration from %s: %v", ke.Origin, e.Err)
	}
	return fmt.Sprintf("invalid configuration %s: %v", e.File, e.Err)
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
			name, closest(name, known)))
	}
	slices.Sort(out)
	return out
}

// closest returns the candidate nearest to name by edit distance, the
// first in candidates' order among equals.
func closest(name string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		if d := editDistance(name, c); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b: the fewest
// single-byte insertions, deletions and substitutions turning one into
// the other.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// originOf returns where the value of key came from, for
// settings.Attribute: "" for the file.
func (c *Config) originOf(key string) string { return c.origins[key] }
