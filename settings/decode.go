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
// *KeyError, or wrapped as a *KeyError for prefix otherwise; each error of
// a joined err (see Split) is prefixed alike.
func Prefix(prefix string, err error) error {
	if err == nil {
		return nil
	}
	if errs := Split(err); len(errs) > 1 {
		for i, e := range errs {
			errs[i] = Prefix(prefix, e)
		}
		return errors.Join(errs...)
	}
	if ke, ok := errors.AsType[*KeyError](err); ok {
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

// Attribute sets the Origin of each *KeyError of err (see Split) that has
// none to origin(key) for its key; "" leaves it to the file. It returns
// err.
func Attribute(err error, origin func(key string) string) error {
	for _, e := range Split(err) {
		var ke *KeyError
		if errors.As(e, &ke) && ke.Origin == "" {
			ke.Origin = origin(ke.Key)
		}
	}
	return err
}

// Split returns the errors that err joins (errors.Join), flattened, or err
// alone; nil for nil. Configuration checks join every mistake they find so
// that a file's errors are reported at once.
func Split(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Split(e)...)
	}
	return out
}

// sortByKey orders errs by the key each names, stably.
func sortByKey(errs []error) {
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(keyOf(a), keyOf(b)) })
}

func keyOf(err error) string {
	if ke, ok := errors.AsType[*KeyError](err); ok {
		return ke.Key
	}
	return ""
}

// Decode copies a source's raw configuration into out (a pointer to a struct
// whose fields carry `mapstructure` tags). Unknown keys are errors, and so
// are values of the wrong type. Durations need a unit ("30s"); a bare
// number is an error, except 0. Numbers and booleans may be strings (the
// environment's values are), a string is split at commas into a list.
// Every mistake is reported, not only the first: the error joins one
// *KeyError per offending key (see Split), sorted by key, each showing the
// value and saying what is allowed, such as `holdoff.min: 100 is not a
// duration: durations need a unit such as 100ms or 30s`; an unknown key
// names the known one it most likely meant.
func Decode(cfg map[string]any, out any) error {
	var md mapstructure.Metadata
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
	var errs []error
	if err := dec.Decode(cfg); err != nil {
		errs = decodeKeyErrors(err)
	}
	slices.Sort(md.Unused)
	for _, key := range md.Unused {
		errs = append(errs, unknownKey(out, key))
	}
	sortByKey(errs)
	return errors.Join(errs...)
}

// unknownKey is the error for a key that out has no field for, naming the
// known key it most likely meant.
func unknownKey(out any, key string) error {
	leaf := key[strings.LastIndex(key, ".")+1:]
	if s := Suggest(leaf, keysBeside(out, key)); s != "" {
		return Errorf(key, "unknown key (did you mean %s?)", s)
	}
	return Errorf(key, "unknown key")
}

// mapKeyDots matches a map key as mapstructure names it, [name], to write
// it as the configuration does, .name; list indexes stay [0].
var mapKeyDots = regexp.MustCompile(`\[([^\]]*[^0-9\]][^\]]*)\]`)

// decodeKeyErrors turns mapstructure's error, which joins one error per
// field that failed, into a *KeyError per field.
func decodeKeyErrors(err error) []error {
	var out []error
	for _, e := range Split(err) {
		if de, ok := errors.AsType[*mapstructure.DecodeError](e); ok {
			out = append(out, &KeyError{Key: mapKeyDots.ReplaceAllString(de.Name(), ".$1"), Err: de.Unwrap()})
		} else {
			out = append(out, &KeyError{Err: e})
		}
	}
	return out
}
