package settings

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
)

var durationType = reflect.TypeFor[time.Duration]()

// checkValue is the decode hook of Decode. It reads every scalar into the
// type of its field itself (through package scalar) and checks that maps,
// lists and scalars go where their kinds belong, so that every mistake is
// worded here, with the value and what is allowed, and none reaches
// mapstructure's own errors (which speak of strconv and reflect kinds) or
// its weak conversions (which would silently make a bare number a
// duration in nanoseconds, true a 1, or a map a one-item list).
func checkValue(from, to reflect.Type, data any) (any, error) {
	if data == nil || to.Kind() == reflect.Pointer || to.Kind() == reflect.Interface {
		return data, nil // a pointer's element comes back here on its own
	}
	if to == durationType {
		return scalar.Duration(data)
	}
	isList := from.Kind() == reflect.Slice || from.Kind() == reflect.Array
	isMap := from.Kind() == reflect.Map
	switch k := to.Kind(); {
	case k == reflect.Struct:
		if !isMap {
			return nil, scalar.Mismatch(describeStruct(to), data)
		}
	case k == reflect.Map:
		if !isMap {
			return nil, scalar.Mismatch("a map", data)
		}
	case k == reflect.Slice || k == reflect.Array:
		// A string is split at commas (the environment's lists) and any
		// other scalar becomes a list of one, when the elements are
		// scalars.
		if elem := to.Elem().Kind(); isMap || (!isList && (elem == reflect.Struct || elem == reflect.Map)) {
			return nil, scalar.Mismatch("a list", data)
		}
	case isList || isMap:
		return nil, scalar.Mismatch(describeScalar(to), data)
	case k == reflect.Bool:
		return scalar.Bool(data)
	case k >= reflect.Int && k <= reflect.Int64:
		bits := to.Bits() - 1
		return scalar.Int(data, -1<<bits, 1<<bits-1)
	case k >= reflect.Uint && k <= reflect.Uintptr:
		return scalar.Uint(data, math.MaxUint64>>(64-to.Bits()))
	case k == reflect.Float32 || k == reflect.Float64:
		return scalar.Float(data)
	case k == reflect.String:
		// A YAML true is the word, as the environment's "true" is (the
		// weak conversion would make it "1"); numbers become their
		// decimal text.
		if b, isBool := data.(bool); isBool {
			return strconv.FormatBool(b), nil
		}
	}
	return data, nil
}

// describeScalar says what a field of type t takes, for an error.
func describeScalar(t reflect.Type) string {
	switch k := t.Kind(); {
	case k == reflect.Bool:
		return "true or false"
	case k >= reflect.Int && k <= reflect.Uintptr:
		return "a whole number"
	case k == reflect.Float32 || k == reflect.Float64:
		return "a number"
	}
	return "a string"
}

// describeStruct says what a struct field takes: a map of its keys.
func describeStruct(t reflect.Type) string {
	keys := structKeys(t)
	if len(keys) == 0 || len(keys) > 8 {
		return "a map"
	}
	return "a map with keys " + strings.Join(keys, ", ")
}

// structKeys lists the keys of struct type t, squashed embedded structs
// included, in field order.
func structKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		switch {
		case name == "-":
		case slices.Contains(strings.Split(opts, ","), "squash") && f.Type.Kind() == reflect.Struct:
			keys = append(keys, structKeys(f.Type)...)
		case name != "":
			keys = append(keys, name)
		default:
			keys = append(keys, strings.ToLower(f.Name))
		}
	}
	return keys
}
