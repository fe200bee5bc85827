package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Changed returns the full key paths of the settings whose values differ
// between a and b, in the order of the configuration's fields:
// "admin.listen", "xds.tls.cert_file", "outputs[0].dir", "sources[1].timeout".
// A list whose length changed is named whole ("outputs"), as is a value
// whose kind changed. What is built from the settings (Entries, the
// shaping rules, the Istio translator) is not compared; the settings it is
// built from are.
func Changed(a, b *Config) []string {
	var out []string
	diff(&out, "", reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
	return out
}

// diff appends to out the paths under key at which a and b differ.
func diff(out *[]string, key string, a, b reflect.Value) {
	for a.Kind() == reflect.Interface || a.Kind() == reflect.Pointer {
		switch {
		case a.IsNil() && b.IsNil():
			return
		case a.IsNil() || b.IsNil() || a.Elem().Type() != b.Elem().Type():
			*out = append(*out, key)
			return
		}
		a, b = a.Elem(), b.Elem()
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if !f.IsExported() || tag == "-" {
				continue
			}
			if tag == "" {
				tag = strings.ToLower(f.Name)
			}
			diff(out, join(key, tag), a.Field(i), b.Field(i))
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			*out = append(*out, key)
			return
		}
		for i := range a.Len() {
			diff(out, fmt.Sprintf("%s[%d]", key, i), a.Index(i), b.Index(i))
		}
	case reflect.Map:
		if a.Type().Key().Kind() != reflect.String {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				*out = append(*out, key)
			}
			return
		}
		var keys []string
		for _, m := range []reflect.Value{a, b} {
			for _, k := range m.MapKeys() {
				if !slices.Contains(keys, k.String()) {
					keys = append(keys, k.String())
				}
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			kv := reflect.ValueOf(k).Convert(a.Type().Key())
			av, bv := a.MapIndex(kv), b.MapIndex(kv)
			if !av.IsValid() || !bv.IsValid() {
				*out = append(*out, join(key, k))
				continue
			}
			diff(out, join(key, k), av, bv)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, key)
		}
	}
}

// join appends a key to a path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
