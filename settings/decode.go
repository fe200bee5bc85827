package settings

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
)

// KeyError is a configuration error tied to one key, such as
// `sources[1].servers[0]: "x" is not host:port`.
type KeyError struct {
	Key string
	Err error
	// Origin says where the offending value came from when that is not
	// the configuration file, such as "environment variable
	// CONSUL_HTTP_ADDR"; the configuration loader names it instead of the
	// file. Error does not include it.
	Origin string
}

func (e *KeyError) Error() string {
	if e.Key == "" {
		return e.Err.Error()
	}
	return e.Key + ": " + e.Err.Error()
}

func (e *KeyError) Unwrap() error { return e.Err }

// Errorf returns a *KeyError for key.
func Errorf(key, format string, args ...any) error {
	return &KeyError{Key: key, Err: fmt.Errorf(format, args...)}
}

// Prefix returns err with prefix prepended to its key when it is a
// *KeyError, or wrapped as a *KeyError for prefix otherwise.
func Prefix(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var ke *KeyError
	if errors.As(err, &ke) {
		key := prefix
		switch {
		case ke.Key == "":
		case strings.HasPrefix(ke.Key, "["):
			key += ke.Key
		default:
			key += "." + ke.Key
		}
		return &KeyError{Key: key, Err: ke.Err, Origin: ke.Origin}
	}
	return &KeyError{Key: prefix, Err: err}
}

// Attribute sets the Origin of err, when it is a *KeyError without one, to
// origin(key) for its key; "" leaves it to the file. It returns err.
func Attribute(err error, origin func(key string) string) error {
	var ke *KeyError
	if errors.As(err, &ke) && ke.Origin == "" {
		ke.Origin = origin(ke.Key)
	}
	return err
}

// Decode copies a source's raw configuration into out (a pointer to a struct
// whose fields carry `mapstructure` tags). Unknown keys are errors, and so
// are values of the wrong type. Durations need a unit ("30s"); a bare
// number is an error, except 0. Numbers and booleans may be strings (the
// environment's values are), a string is split at commas into a list. The
// error is a *KeyError naming the offending key, showing the value and
// saying what is allowed, such as `holdoff.min: 100 is not a duration:
// durations need a unit such as 100ms or 30s`.
func Decode(cfg map[string]any, out any) error {
	var md mapstructure.Metadata
	var fieldErr error
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:   out,
		Metadata: &md,
		// Scalars are read by checkValue; what weak typing adds beyond it
		// is a single value or a comma-separated string for a list.
		WeaklyTypedInput: true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			checkValue,
			mapstructure.StringToSliceHookFunc(","),
		),
	})
	if err != nil {
		return err
	}
	if err := dec.Decode(cfg); err != nil {
		fieldErr = decodeKeyError(err)
	}
	if len(md.Unused) > 0 {
		slices.Sort(md.Unused)
		return Errorf(md.Unused[0], "unknown key")
	}
	return fieldErr
}

// mapKeyDots matches a map key as mapstructure names it, [name], to write
// it as the configuration does, .name; list indexes stay [0].
var mapKeyDots = regexp.MustCompile(`\[([^\]]*[^0-9\]][^\]]*)\]`)

// decodeKeyError turns mapstructure's error into a *KeyError naming the
// first field that failed.
func decodeKeyError(err error) error {
	var de *mapstructure.DecodeError
	if errors.As(err, &de) {
		return &KeyError{Key: mapKeyDots.ReplaceAllString(de.Name(), ".$1"), Err: de.Unwrap()}
	}
	return &KeyError{Err: err}
}
