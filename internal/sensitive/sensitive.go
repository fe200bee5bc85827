// Package sensitive knows which fields of Envoy's resources hold secret
// material (those annotated udpa.annotations.sensitive: private keys,
// passwords, session ticket keys, generic secrets) and blanks them, the
// way Envoy's own config dump does, so that a dump, an error or a log
// line never carries them.
package sensitive

import (
	"github.com/cncf/xds/go/udpa/annotations"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Redacted is what replaces a secret value, as in Envoy's config dump.
const Redacted = "[redacted]"

// Field reports whether fd holds secret material.
func Field(fd protoreflect.FieldDescriptor) bool {
	s, _ := proto.GetExtension(fd.Options(), annotations.E_Sensitive).(bool)
	return s
}

// Redact returns m with every sensitive value replaced by Redacted (a
// DataSource holding it inline becomes inline_string Redacted; one naming
// a file or an environment variable is kept, as it holds no secret),
// descending into Anys it can decode; changed is false, and m itself is
// returned, when m holds none. m is never modified.
func Redact(m proto.Message) (out proto.Message, changed bool) {
	c := proto.Clone(m)
	if !redact(c.ProtoReflect()) {
		return m, false
	}
	return c, true
}

// redact blanks the sensitive values of m in place and reports whether
// it changed anything.
func redact(m protoreflect.Message) bool {
	changed := false
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil || !redact(inner.ProtoReflect()) {
			return false
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
		if err != nil {
			return false
		}
		a.Value = b
		return true
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if Field(fd) {
			changed = blank(m, fd, v) || changed
			return true
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					changed = redact(mv.Message()) || changed
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					changed = redact(v.List().Get(i).Message()) || changed
				}
			}
		case fd.Message() != nil:
			changed = redact(v.Message()) || changed
		}
		return true
	})
	return changed
}

// blank replaces the sensitive field fd of m, set to v.
func blank(m protoreflect.Message, fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	if fd.IsList() {
		l := v.List()
		changed := false
		for i := range l.Len() {
			if nv, ok := blankValue(fd, l.Get(i)); ok {
				l.Set(i, nv)
				changed = true
			}
		}
		return changed
	}
	if fd.IsMap() {
		m.Clear(fd)
		return true
	}
	if nv, ok := blankValue(fd, v); ok {
		m.Set(fd, nv)
		return true
	}
	return false
}

// blankValue is the redacted form of one value of fd, false when it holds
// nothing secret.
func blankValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(Redacted), true
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(Redacted)), true
	case protoreflect.MessageKind:
		if ds, ok := v.Message().Interface().(*corev3.DataSource); ok {
			switch ds.GetSpecifier().(type) {
			case *corev3.DataSource_Filename, *corev3.DataSource_EnvironmentVariable, nil:
				return v, false
			}
			return protoreflect.ValueOfMessage((&corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: Redacted}}).ProtoReflect()), true
		}
		return protoreflect.ValueOfMessage(v.Message().Type().New()), true
	}
	return protoreflect.ValueOf(fd.Default().Interface()), true
}
