package translate

import (
	"regexp"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xdsbridge/xdsbridge/settings"
)

// protojsonPosition matches protojson's prefixes: its package name and
// the position in the JSON text it parsed.
var protojsonPosition = regexp.MustCompile(`^proto: (syntax error )?(\(line \d+:\d+\): )?`)

// pgvError is what the generated ValidateAll methods return for one field:
// its Go name (with "[i]" or "[key]" for an element), why, and, for an
// embedded message, the error inside it.
type pgvError interface {
	Field() string
	Reason() string
	Cause() error
}

// invalidMessage words a ValidateAll error of a message built from a
// fragment as a *settings.KeyError: the snake_case path of the first field
// that failed, from key, and the innermost reason ("value must be greater
// than 0s"), instead of the chain of Go names the generated code writes
// ("invalid Cluster.CommonLbConfig: embedded message failed validation |
// caused by: ..."). what names the message in the reason ("the shaped
// cluster"). Inside an Any the path stops at the Any.
func invalidMessage(key, what string, md protoreflect.MessageDescriptor, err error) error {
	for {
		if m, ok := err.(interface{ AllErrors() []error }); ok && len(m.AllErrors()) > 0 {
			err = m.AllErrors()[0]
			continue
		}
		e, ok := err.(pgvError)
		if !ok {
			return settings.Errorf(key, "%s is invalid: %v", what, err)
		}
		if md != nil {
			name, index, _ := strings.Cut(e.Field(), "[")
			if fd := goField(md, name); fd != nil {
				key += "." + string(fd.Name())
				if index != "" {
					key += "[" + index
				}
				md = fd.Message()
				if fd.IsMap() {
					md = fd.MapValue().Message()
				}
			} else {
				md = nil
			}
		}
		if e.Cause() == nil {
			return settings.Errorf(key, "%s is invalid: %s", what, e.Reason())
		}
		err = e.Cause()
	}
}

// goField finds the field of md whose generated Go name is name
// (OutlierDetection, Consecutive_5Xx): the names compare equal without
// case and underscores.
func goField(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	flat := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); flat(string(fd.Name())) == flat(name) {
			return fd
		}
	}
	return nil
}
