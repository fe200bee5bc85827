package sources

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
)

// KeyError is a configuration error tied to one key, such as
// `sources[1].servers[0]: "x" is not host:port`.
type KeyError struct {
	Key string
	Err error
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
		return &KeyError{Key: key, Err: ke.Err}
	}
	return &KeyError{Key: prefix, Err: err}
}

// Decode copies a source's raw configuration into out (a pointer to a struct
// whose fields carry `mapstructure` tags). Unknown keys are errors, and so
// are values of the wrong type; durations are written like "30s". The error
// is a *KeyError naming the offending key.
func Decode(cfg map[string]any, out any) error {
	var md mapstructure.Metadata
	var fieldErr error
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           out,
		Metadata:         &md,
		WeaklyTypedInput: true, // environment values arrive as strings
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
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

// decodeKeyError turns mapstructure's error into a *KeyError naming the
// first field that failed.
func decodeKeyError(err error) error {
	var de *mapstructure.DecodeError
	if errors.As(err, &de) {
		return &KeyError{Key: de.Name(), Err: de.Unwrap()}
	}
	return &KeyError{Err: err}
}
