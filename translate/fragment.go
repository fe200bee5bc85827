package translate

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/internal/sensitive"
	"github.com/xdsbridge/xdsbridge/settings"
)

// decodeFragment decodes a fragment written as in an Envoy configuration
// (field names in snake_case or lowerCamelCase, Any values with "@type",
// durations like "5s" or "100ms") into m, and returns the top-level fields
// it sets, in the order of their keys. A mistake is a *settings.KeyError
// whose key is the snake_case path of the offending field from key; so is
// a top-level field among owned, with the reason given.
func decodeFragment(m proto.Message, fragment map[string]any, key string, owned []protoreflect.Name, reason string) ([]protoreflect.FieldDescriptor, error) {
	md := m.ProtoReflect().Descriptor()
	norm, err := normalize(md, fragment, key)
	if err != nil {
		return nil, err
	}
	var fields []protoreflect.FieldDescriptor
	for _, k := range slices.Sorted(maps.Keys(fragment)) {
		fd := field(md, k)
		if slices.Contains(owned, fd.Name()) {
			return nil, settings.Errorf(key+"."+string(fd.Name()), "%s", reason)
		}
		fields = append(fields, fd)
	}
	b, err := json.Marshal(norm)
	if err != nil {
		return nil, settings.Errorf(key, "%v", err)
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		// normalize catches what a person writes wrong; what is left
		// is said without protojson's position in a text no one wrote.
		return nil, settings.Errorf(key, "%s", protojsonPosition.ReplaceAllString(err.Error(), ""))
	}
	return fields, nil
}

// normalize walks a fragment as written (decoded YAML: maps, lists,
// scalars) against md, the message it describes, and returns it ready for
// protojson. It names the first mistake by its full key path in the
// proto's snake_case names, with the value and what is allowed: an
// unknown field or "@type", a value of the wrong kind, a whole number out
// of its field's range, an enum value that does not exist (listing those
// that do, from the enum's descriptor). protojson's own errors would say
// "(line 1:73)" of a JSON text the user never wrote and name fields in
// lowerCamelCase. Durations may be written as in the rest of the
// configuration ("100ms", "1h30m"); they are rewritten into protojson's
// seconds. Scalars written as strings, as the environment has them, become
// the numbers and booleans protojson wants.
func normalize(md protoreflect.MessageDescriptor, v any, key string) (any, error) {
	if v == nil {
		return nil, nil // JSON null: the field is left unset
	}
	name := md.FullName()
	switch {
	case name == "google.protobuf.Duration":
		d, err := scalar.Duration(v)
		if err != nil {
			return nil, settings.Errorf(key, "%v", err)
		}
		return protoDuration(d), nil
	case wrapper(name):
		return normalizeScalar(md.Fields().ByName("value"), v, key)
	case strings.HasPrefix(string(name), "google.protobuf.") && name != "google.protobuf.Any":
		return v, nil // Struct, Value, Timestamp...: their own JSON forms
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, settings.Errorf(key, "%v", scalar.Mismatch(fmt.Sprintf("a map of %s fields", name), v))
	}
	isAny := name == "google.protobuf.Any"
	if isAny {
		url, _ := obj["@type"].(string)
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
		if err != nil {
			return nil, settings.Errorf(key+".@type", "unknown type %q", url)
		}
		if md = mt.Descriptor(); strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
			return v, nil // a well-known type in an Any: {"@type": ..., "value": ...}
		}
	}
	out := make(map[string]any, len(obj))
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k == "@type" && isAny {
			out[k] = obj[k]
			continue
		}
		fd := field(md, k)
		if fd == nil {
			return nil, settings.Errorf(key+"."+k, "unknown field of %s", md.FullName())
		}
		val, err := normalizeField(fd, obj[k], key+"."+string(fd.Name()))
		if err != nil {
			return nil, err
		}
		out[k] = val
	}
	return out, nil
}

// normalizeField normalizes the value of one field: each element of a
// list, each value of a map, or the single value.
func normalizeField(fd protoreflect.FieldDescriptor, v any, key string) (any, error) {
	if sensitive.Field(fd) {
		// A private key written wrong must not end up in an error
		// message, and so in a log line.
		out, err := normalizeValue(fd, v, key)
		if err != nil {
			return nil, settings.Errorf(key, "is not a valid %s (the value is not shown: the field is sensitive)", describeField(fd))
		}
		return out, nil
	}
	return normalizeValue(fd, v, key)
}

// describeField names what a field holds: its message type or its kind.
func describeField(fd protoreflect.FieldDescriptor) string {
	if md := fd.Message(); md != nil {
		return string(md.FullName())
	}
	return fd.Kind().String()
}

// normalizeValue is normalizeField without the sensitivity check.
func normalizeValue(fd protoreflect.FieldDescriptor, v any, key string) (any, error) {
	switch {
	case v == nil:
		return nil, nil
	case fd.IsMap():
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, settings.Errorf(key, "%v", scalar.Mismatch("a map", v))
		}
		out := make(map[string]any, len(obj))
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			val, err := normalizeSingle(fd.MapValue(), obj[k], key+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = val
		}
		return out, nil
	case fd.IsList():
		list, ok := v.([]any)
		if !ok {
			return nil, settings.Errorf(key, "%v", scalar.Mismatch("a list", v))
		}
		out := make([]any, len(list))
		for i, item := range list {
			val, err := normalizeSingle(fd, item, fmt.Sprintf("%s[%d]", key, i))
			if err != nil {
				return nil, err
			}
			out[i] = val
		}
		return out, nil
	}
	return normalizeSingle(fd, v, key)
}

// normalizeSingle normalizes one value of fd's type (a list's element or
// a map's value when fd is repeated).
func normalizeSingle(fd protoreflect.FieldDescriptor, v any, key string) (any, error) {
	// A null field is left unset (normalizeField), but a list element or
	// a map value has nothing to leave unset: only a
	// google.protobuf.Value can be null.
	if v == nil && (fd.Message() == nil || fd.Message().FullName() != "google.protobuf.Value") {
		return nil, settings.Errorf(key, "needs a value, not null")
	}
	if md := fd.Message(); md != nil {
		return normalize(md, v, key)
	}
	return normalizeScalar(fd, v, key)
}

// normalizeScalar checks a scalar field's value and returns it in the
// JSON form protojson reads.
func normalizeScalar(fd protoreflect.FieldDescriptor, v any, key string) (any, error) {
	if v == nil {
		return nil, nil
	}
	var val any
	var err error
	switch fd.Kind() {
	case protoreflect.EnumKind:
		val, err = enumValue(fd.Enum(), v)
	case protoreflect.BoolKind:
		val, err = scalar.Bool(v)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		val, err = scalar.Int(v, math.MinInt32, math.MaxInt32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		val, err = scalar.Int(v, math.MinInt64, math.MaxInt64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		val, err = scalar.Uint(v, math.MaxUint32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		val, err = scalar.Uint(v, math.MaxUint64)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		if s, ok := v.(string); ok && (s == "NaN" || s == "Infinity" || s == "-Infinity") {
			return s, nil
		}
		val, err = scalar.Float(v)
	default: // strings, and bytes in base64
		if _, ok := v.(string); !ok {
			err = scalar.Mismatch("a string", v)
		}
		val = v
	}
	if err != nil {
		return nil, settings.Errorf(key, "%v", err)
	}
	return val, nil
}

// enumValue returns the name of the value of ed that v names (by name or
// number), or an error listing the names it may take.
func enumValue(ed protoreflect.EnumDescriptor, v any) (any, error) {
	if ed.FullName() == "google.protobuf.NullValue" {
		return v, nil
	}
	values := ed.Values()
	if s, ok := v.(string); ok && values.ByName(protoreflect.Name(s)) != nil {
		return s, nil
	}
	if n, err := scalar.Int(v, math.MinInt32, math.MaxInt32); err == nil {
		if ev := values.ByNumber(protoreflect.EnumNumber(n)); ev != nil {
			return string(ev.Name()), nil
		}
	}
	var names []string
	for i := range values.Len() {
		ev := values.Get(i)
		if opts, _ := ev.Options().(*descriptorpb.EnumValueOptions); !opts.GetDeprecated() {
			names = append(names, string(ev.Name()))
		}
	}
	return nil, fmt.Errorf("unknown value %s (want %s)", scalar.Show(v), strings.Join(names, ", "))
}

// wrapper reports whether name is one of the wrapper types, whose JSON
// form is the bare scalar.
func wrapper(name protoreflect.FullName) bool {
	return strings.HasPrefix(string(name), "google.protobuf.") && strings.HasSuffix(string(name), "Value") &&
		name != "google.protobuf.Value" && name != "google.protobuf.ListValue"
}

// protoDuration writes d in protojson's form: seconds with up to nine
// decimals and an "s".
func protoDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("%s%d.%09ds", sign, d/time.Second, d%time.Second)
}
