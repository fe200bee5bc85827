// Package scalar reads the scalar values of a configuration (whole
// numbers, numbers, booleans, durations) from what a YAML or JSON decoder
// or the environment produced, and words what is wrong with them for a
// person: the value as written and what is allowed, never the parser's own
// text (strconv, reflect kinds).
//
// Its errors carry no key; the caller knows the key and prefixes it
// (settings.KeyError). Both the decoding of the bridge's own settings and
// the checking of Envoy Cluster fragments use it, so that one mistake
// reads the same wherever it is made.
package scalar

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DurationHint is what every duration error says is allowed.
const DurationHint = "durations need a unit such as 100ms or 30s"

// Int returns v as a whole number in [lo, hi]. v may be any Go integer,
// a float without a fraction (YAML writes 1e3 as one), or a decimal
// string (the environment's values are strings).
func Int(v any, lo, hi int64) (int64, error) {
	neg, mag, err := whole(v)
	if err != nil {
		return 0, err
	}
	var n int64
	switch {
	case neg && mag > 0 && mag <= 1<<63:
		n = -int64(mag-1) - 1
	case (neg && mag == 0) || (!neg && mag <= math.MaxInt64):
		n = int64(mag)
	default:
		return 0, fmt.Errorf("%s is out of range (%d to %d)", Show(v), lo, hi)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s is out of range (%d to %d)", Show(v), lo, hi)
	}
	return n, nil
}

// Uint returns v, read as by Int, as a whole number in [0, hi].
func Uint(v any, hi uint64) (uint64, error) {
	neg, mag, err := whole(v)
	if err != nil {
		return 0, err
	}
	if (neg && mag != 0) || mag > hi {
		return 0, fmt.Errorf("%s is out of range (0 to %d)", Show(v), hi)
	}
	return mag, nil
}

// whole splits v into a sign and a magnitude.
func whole(v any) (neg bool, mag uint64, err error) {
	notWhole := fmt.Errorf("%s is not a whole number", Show(v))
	switch n := v.(type) {
	case int:
		return signed(int64(n))
	case int8:
		return signed(int64(n))
	case int16:
		return signed(int64(n))
	case int32:
		return signed(int64(n))
	case int64:
		return signed(n)
	case uint:
		return false, uint64(n), nil
	case uint8:
		return false, uint64(n), nil
	case uint16:
		return false, uint64(n), nil
	case uint32:
		return false, uint64(n), nil
	case uint64:
		return false, n, nil
	case float32:
		return wholeFloat(float64(n), notWhole)
	case float64:
		return wholeFloat(n, notWhole)
	case string:
		s := strings.TrimPrefix(n, "+")
		neg = strings.HasPrefix(s, "-")
		mag, perr := strconv.ParseUint(strings.TrimPrefix(s, "-"), 10, 64)
		var ne *strconv.NumError
		if errors.As(perr, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return false, 0, fmt.Errorf("%s is out of range", Show(v))
		}
		if perr != nil || s == "" {
			return false, 0, notWhole
		}
		return neg, mag, nil
	}
	return false, 0, Mismatch("a whole number", v)
}

func signed(n int64) (bool, uint64, error) {
	if n < 0 {
		return true, uint64(-(n + 1)) + 1, nil
	}
	return false, uint64(n), nil
}

func wholeFloat(f float64, notWhole error) (bool, uint64, error) {
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
		return false, 0, notWhole
	}
	if math.Abs(f) >= 1<<64 {
		return false, 0, fmt.Errorf("%s is out of range", Show(f))
	}
	return f < 0, uint64(math.Abs(f)), nil
}

// Float returns v as a finite number: any Go number or a decimal string.
func Float(v any) (float64, error) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case string:
		var err error
		if f, err = strconv.ParseFloat(n, 64); err != nil {
			return 0, fmt.Errorf("%s is not a number", Show(v))
		}
	default:
		neg, mag, err := whole(v)
		if err != nil {
			return 0, Mismatch("a number", v)
		}
		f = float64(mag)
		if neg {
			f = -f
		}
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%s is not a number", Show(v))
	}
	return f, nil
}

// Bool returns v as a boolean: true or false, or a string such as "true",
// "false", "1" or "0" (from the environment).
func Bool(v any) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		if p, err := strconv.ParseBool(b); err == nil {
			return p, nil
		}
		return false, fmt.Errorf("%s is not true or false", Show(v))
	}
	return false, Mismatch("true or false", v)
}

// Duration returns v as a duration written with a unit, such as "100ms",
// "30s" or "1h30m". A number without a unit is an error (it would
// otherwise silently be nanoseconds), except 0, which is zero in any
// unit; whether zero is allowed is for the setting to say. A
// time.Duration passes as it is.
func Duration(v any) (time.Duration, error) {
	bad := fmt.Errorf("%s is not a duration: %s", Show(v), DurationHint)
	switch d := v.(type) {
	case time.Duration:
		return d, nil
	case string:
		p, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return 0, bad
		}
		return p, nil
	case bool, nil:
		return 0, bad
	}
	if f, err := Float(v); err == nil && f == 0 {
		return 0, nil
	}
	return 0, bad
}

// Mismatch is the error for a value of the wrong kind, such as a list
// where a string belongs: `want a string, not the list [a, b]`.
func Mismatch(want string, v any) error {
	return fmt.Errorf("want %s, not %s", want, Describe(v))
}

// Describe names v's kind and shows it: `the list [a, b]`, `the map {a:
// 1}`, or the value alone for a scalar.
func Describe(v any) string {
	switch v.(type) {
	case []any:
		return "the list " + Show(v)
	case map[string]any, map[any]any:
		return "the map " + Show(v)
	}
	return Show(v)
}
