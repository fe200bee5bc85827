package deploycheck

import (
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad/api"
	"github.com/zclconf/go-cty/cty"
)

// ParseJob decodes a Nomad job file, HCL2 holding one job block, into the
// API's Job. Every argument and block must be declared by an hcl tag of the
// type it lands in (Nomad's HCL2 parser decodes with the same tags); one
// that is not, a block given twice where one is allowed, or a value of the
// wrong type is an error naming the file, line and key. The job's label is
// its ID, and its Name unless the body sets one, as in Nomad.
func ParseJob(filename string, src []byte) (*api.Job, error) {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	body := f.Body.(*hclsyntax.Body)
	for _, a := range body.Attributes {
		return nil, fmt.Errorf("%s: top-level argument %q: only a job block is supported", a.NameRange, a.Name)
	}
	if len(body.Blocks) != 1 || body.Blocks[0].Type != "job" || len(body.Blocks[0].Labels) != 1 {
		return nil, fmt.Errorf("%s: want exactly one block `job \"NAME\" {...}` and nothing else", filename)
	}
	b := body.Blocks[0]
	job := &api.Job{}
	if err := decodeBody(b.Body, reflect.ValueOf(job).Elem()); err != nil {
		return nil, err
	}
	id := b.Labels[0]
	job.ID = &id
	if job.Name == nil {
		job.Name = &id
	}
	return job, nil
}

// fields is what the hcl tags of a struct type declare.
type fields struct {
	attrs    map[string]int // argument name -> field index
	blocks   map[string]int // block type -> field index
	labels   []int          // label fields, in order
	required []string       // arguments without ",optional"
}

func fieldsOf(t reflect.Type) fields {
	fs := fields{attrs: map[string]int{}, blocks: map[string]int{}}
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("hcl")
		if !ok {
			continue
		}
		name, kind, _ := strings.Cut(tag, ",")
		switch kind {
		case "block":
			fs.blocks[name] = i
		case "label":
			fs.labels = append(fs.labels, i)
		case "optional":
			fs.attrs[name] = i
		case "":
			fs.attrs[name] = i
			fs.required = append(fs.required, name)
		}
	}
	return fs
}

// decodeBody decodes body into the struct v.
func decodeBody(body *hclsyntax.Body, v reflect.Value) error {
	fs := fieldsOf(v.Type())
	names := make([]string, 0, len(body.Attributes))
	for n := range body.Attributes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		a := body.Attributes[n]
		i, ok := fs.attrs[n]
		if !ok {
			return fmt.Errorf("%s: unknown argument %q in %s", a.NameRange, n, v.Type().Name())
		}
		if err := assignExpr(v.Field(i), a.Expr); err != nil {
			return fmt.Errorf("%s: %s: %w", a.Expr.Range(), n, err)
		}
	}
	for _, n := range fs.required {
		if _, ok := body.Attributes[n]; !ok {
			return fmt.Errorf("%s: %s needs the argument %q", body.SrcRange, v.Type().Name(), n)
		}
	}
	seen := map[int]bool{}
	for _, b := range body.Blocks {
		i, ok := fs.blocks[b.Type]
		if !ok {
			return fmt.Errorf("%s: unknown block %q in %s", b.TypeRange, b.Type, v.Type().Name())
		}
		f := v.Field(i)
		if k := f.Kind(); k != reflect.Slice && !(k == reflect.Map && len(b.Labels) == 1) {
			if seen[i] {
				return fmt.Errorf("%s: a second %q block in %s, where one is allowed", b.TypeRange, b.Type, v.Type().Name())
			}
			seen[i] = true
		}
		if err := decodeBlock(b, f); err != nil {
			return err
		}
	}
	return nil
}

// decodeBlock decodes block b into the field f: a struct (or pointer to
// one), a slice of them, a map of them keyed by the block's label, or a map
// of the block's arguments.
func decodeBlock(b *hclsyntax.Block, f reflect.Value) error {
	t := f.Type()
	switch {
	case t.Kind() == reflect.Slice:
		elem := reflect.New(t.Elem()).Elem()
		if err := decodeStructBlock(b, elem); err != nil {
			return err
		}
		f.Set(reflect.Append(f, elem))
		return nil
	case t.Kind() == reflect.Map && len(b.Labels) == 1:
		if f.IsNil() {
			f.Set(reflect.MakeMap(t))
		}
		key := reflect.ValueOf(b.Labels[0])
		if f.MapIndex(key).IsValid() {
			return fmt.Errorf("%s: a second %q block labelled %q", b.TypeRange, b.Type, b.Labels[0])
		}
		elem := reflect.New(t.Elem()).Elem()
		if err := decodeStructBlock(b, elem); err != nil {
			return err
		}
		f.SetMapIndex(key, elem)
		return nil
	case t.Kind() == reflect.Map:
		if len(b.Labels) != 0 {
			return fmt.Errorf("%s: %q takes no label", b.TypeRange, b.Type)
		}
		m, err := blockMap(b.Body, t)
		if err != nil {
			return err
		}
		f.Set(m)
		return nil
	}
	return decodeStructBlock(b, f)
}

// decodeStructBlock decodes b into the struct (or pointer to a struct) v,
// its labels into the label fields.
func decodeStructBlock(b *hclsyntax.Block, v reflect.Value) error {
	if v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return fmt.Errorf("%s: block %q lands in a %s, which this decoder does not support", b.TypeRange, b.Type, v.Type())
	}
	fs := fieldsOf(v.Type())
	if len(b.Labels) != len(fs.labels) {
		return fmt.Errorf("%s: block %q takes %d label(s), has %d", b.TypeRange, b.Type, len(fs.labels), len(b.Labels))
	}
	for i, l := range b.Labels {
		if err := assign(v.Field(fs.labels[i]), cty.StringVal(l)); err != nil {
			return fmt.Errorf("%s: label of %q: %w", b.TypeRange, b.Type, err)
		}
	}
	return decodeBody(b.Body, v)
}

// blockMap decodes a block whose arguments are the entries of a map (meta,
// env, a driver's config). Nested blocks are allowed only in maps of any
// value, where each becomes a map appended to a list under its type, as
// Nomad hands them to the driver.
func blockMap(body *hclsyntax.Body, t reflect.Type) (reflect.Value, error) {
	m := reflect.MakeMap(t)
	for n, a := range body.Attributes {
		elem := reflect.New(t.Elem()).Elem()
		if err := assignExpr(elem, a.Expr); err != nil {
			return m, fmt.Errorf("%s: %s: %w", a.Expr.Range(), n, err)
		}
		m.SetMapIndex(reflect.ValueOf(n), elem)
	}
	for _, b := range body.Blocks {
		if t.Elem().Kind() != reflect.Interface || len(b.Labels) != 0 {
			return m, fmt.Errorf("%s: unexpected block %q", b.TypeRange, b.Type)
		}
		nested, err := blockMap(b.Body, t)
		if err != nil {
			return m, err
		}
		key := reflect.ValueOf(b.Type)
		list, _ := m.MapIndex(key).Interface().([]any)
		if v := m.MapIndex(key); v.IsValid() && list == nil {
			return m, fmt.Errorf("%s: %q is both an argument and a block", b.TypeRange, b.Type)
		}
		m.SetMapIndex(key, reflect.ValueOf(append(list, nested.Interface())))
	}
	return m, nil
}

// assignExpr evaluates e without variables or functions and assigns the
// value to dst.
func assignExpr(dst reflect.Value, e hclsyntax.Expression) error {
	val, diags := e.Value(nil)
	if diags.HasErrors() {
		return diags
	}
	return assign(dst, val)
}

var durationType = reflect.TypeFor[time.Duration]()

// assign converts val to dst's type: strings, bools, numbers (exact
// integers for integer fields), durations written as Go durations ("30s"),
// lists, maps and, for fields of any type, whatever the value is.
func assign(dst reflect.Value, val cty.Value) error {
	if val.IsNull() || !val.IsWhollyKnown() {
		return fmt.Errorf("no value")
	}
	if dst.Kind() == reflect.Pointer {
		p := reflect.New(dst.Type().Elem())
		if err := assign(p.Elem(), val); err != nil {
			return err
		}
		dst.Set(p)
		return nil
	}
	ty := val.Type()
	if dst.Type() == durationType {
		if ty != cty.String {
			return fmt.Errorf("want a duration such as \"30s\", have %s", ty.FriendlyName())
		}
		d, err := time.ParseDuration(val.AsString())
		if err != nil {
			return err
		}
		dst.SetInt(int64(d))
		return nil
	}
	switch dst.Kind() {
	case reflect.String:
		if ty != cty.String {
			return fmt.Errorf("want a string, have %s", ty.FriendlyName())
		}
		dst.SetString(val.AsString())
	case reflect.Bool:
		if ty != cty.Bool {
			return fmt.Errorf("want a bool, have %s", ty.FriendlyName())
		}
		dst.SetBool(val.True())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := exactInt(val)
		if err != nil {
			return err
		}
		if dst.OverflowInt(n) {
			return fmt.Errorf("%d overflows %s", n, dst.Type())
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := exactInt(val)
		if err != nil {
			return err
		}
		if n < 0 || dst.OverflowUint(uint64(n)) {
			return fmt.Errorf("%d does not fit %s", n, dst.Type())
		}
		dst.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		if ty != cty.Number {
			return fmt.Errorf("want a number, have %s", ty.FriendlyName())
		}
		f, _ := val.AsBigFloat().Float64()
		dst.SetFloat(f)
	case reflect.Slice:
		if !ty.IsListType() && !ty.IsTupleType() && !ty.IsSetType() {
			return fmt.Errorf("want a list, have %s", ty.FriendlyName())
		}
		s := reflect.MakeSlice(dst.Type(), 0, val.LengthInt())
		for it := val.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			elem := reflect.New(dst.Type().Elem()).Elem()
			if err := assign(elem, ev); err != nil {
				return err
			}
			s = reflect.Append(s, elem)
		}
		dst.Set(s)
	case reflect.Map:
		if !ty.IsMapType() && !ty.IsObjectType() {
			return fmt.Errorf("want a map, have %s", ty.FriendlyName())
		}
		m := reflect.MakeMap(dst.Type())
		for it := val.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			elem := reflect.New(dst.Type().Elem()).Elem()
			if err := assign(elem, ev); err != nil {
				return fmt.Errorf("%s: %w", k.AsString(), err)
			}
			m.SetMapIndex(reflect.ValueOf(k.AsString()), elem)
		}
		dst.Set(m)
	case reflect.Interface:
		g, err := goValue(val)
		if err != nil {
			return err
		}
		dst.Set(reflect.ValueOf(g))
	default:
		return fmt.Errorf("a field of type %s is not supported by this decoder", dst.Type())
	}
	return nil
}

func exactInt(val cty.Value) (int64, error) {
	if val.Type() != cty.Number {
		return 0, fmt.Errorf("want a whole number, have %s", val.Type().FriendlyName())
	}
	n, acc := val.AsBigFloat().Int64()
	if acc != big.Exact {
		return 0, fmt.Errorf("want a whole number, have %s", val.AsBigFloat().String())
	}
	return n, nil
}

// goValue converts a value of any type to strings, bools, int64 or float64
// numbers, []any and map[string]any.
func goValue(val cty.Value) (any, error) {
	ty := val.Type()
	switch {
	case ty == cty.String:
		return val.AsString(), nil
	case ty == cty.Bool:
		return val.True(), nil
	case ty == cty.Number:
		if n, err := exactInt(val); err == nil {
			return n, nil
		}
		f, _ := val.AsBigFloat().Float64()
		return f, nil
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		var out []any
		err := assign(reflect.ValueOf(&out).Elem(), val)
		return out, err
	case ty.IsMapType() || ty.IsObjectType():
		var out map[string]any
		err := assign(reflect.ValueOf(&out).Elem(), val)
		return out, err
	}
	return nil, fmt.Errorf("unsupported value of type %s", ty.FriendlyName())
}
