package scalar

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

var (
	// templatePrefix is what text/template puts before every message:
	// the template's name and position, useless in a one-line setting.
	templatePrefix = regexp.MustCompile(`^template: [^:]*:(\d+:)*\s*(executing "[^"]*" at <[^>]*>: )?`)
	unknownField   = regexp.MustCompile(`can't evaluate field (\w+) in type`)
)

// TemplateError words an error from parsing or executing a text/template
// on data (a struct) for a person: without the package's prefixes, and an
// unknown field named with the fields data has, as in `unknown field .Nam
// (want .Name, .Source, .Meta or .Locality)`.
func TemplateError(err error, data any) error {
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("unknown field .%s (want %s)", m[1], fieldList(reflect.TypeOf(data)))
	}
	return errors.New(templatePrefix.ReplaceAllString(err.Error(), ""))
}

// fieldList lists the exported fields of struct type t as a template
// names them: ".A, .B or .C".
func fieldList(t reflect.Type) string {
	var names []string
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		for f := range t.Fields() {
			if f.IsExported() {
				names = append(names, "."+f.Name)
			}
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
