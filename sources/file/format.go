package file

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Parse reads a services document in the xdsbridge format (JSON when
// isJSON, else YAML) into services with their endpoints in canonical order;
// Schema.Parse reads Prometheus target groups too. A problem of shape or
// range rejects the whole file with a *settings.KeyError naming the field,
// such as `services[1].endpoints[0].port: 70000 is outside 1..65535 (line
// 9)`. An endpoint whose address is well formed but no IP address (a host
// name: EDS takes IPs) is registry data that cannot be served rather than a
// broken file: it is left out, and Schema.Parse reports it in
// Document.Dropped.
//
// The document is walked as a yaml.Node tree rather than decoded into
// structs: that way every error, unknown fields included, names the path of
// the field and not only a line and a Go type. JSON is decoded strictly by
// encoding/json and converted to the same tree.
func Parse(data []byte, isJSON bool) ([]sources.Service, error) {
	root, err := parseTree(data, isJSON)
	if err != nil {
		return nil, err
	}
	svcs, _, err := parseDocument(root)
	return svcs, err
}

// parseDocument is Parse on a parsed tree, returning the endpoints it left
// out too.
func parseDocument(root *yaml.Node) ([]sources.Service, Dropped, error) {
	p := parser{dropped: new(Dropped)}
	svcs, err := p.document(root)
	return svcs, *p.dropped, err
}

// ParseEndpoint reads one endpoint in the schema of an entry of a
// service's `endpoints` list (address, port, weight, priority, health,
// locality, metadata), written as a JSON object: the instance schema that
// registries keeping one record per instance (the etcd source's json
// format) share with this source. Any problem is a *settings.KeyError
// naming the field, such as `port: 70000 is outside 1..65535`.
func ParseEndpoint(data []byte) (sources.Endpoint, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return sources.Endpoint{}, &settings.KeyError{Err: errors.New("empty (want a JSON object with address and port)")}
	}
	root, err := parseTree(data, true)
	if err != nil {
		return sources.Endpoint{}, err
	}
	e, err := parser{}.endpoint("", root)
	e.Origin = sources.Origin{}
	return e, err
}

func parseTree(data []byte, isJSON bool) (*yaml.Node, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		// An empty document is far more often a write caught half way
		// than a wish to remove every service; that is written
		// `services: []` (or `[]` of target groups).
		return nil, &settings.KeyError{Err: errors.New("document is empty (write `services: []` or `[]` for no services)")}
	}
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			if syn, ok := errors.AsType[*json.SyntaxError](err); ok {
				line := 1 + bytes.Count(data[:min(syn.Offset, int64(len(data)))], []byte("\n"))
				err = fmt.Errorf("%w (line %d)", err, line)
			}
			return nil, &settings.KeyError{Err: fmt.Errorf("parsing JSON: %w", err)}
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, &settings.KeyError{Err: errors.New("parsing JSON: data after the top-level value")}
		}
		return jsonNode(v), nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &settings.KeyError{Err: errors.New("no YAML document (write `services: []` or `[]` for no services)")}
		}
		return nil, &settings.KeyError{Err: fmt.Errorf("parsing YAML: %w", err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &settings.KeyError{Err: errors.New("parsing YAML: more than one document")}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return &doc, nil
}

// jsonNode converts a value decoded by encoding/json into a yaml.Node tree
// (without line numbers), so that one walker checks both formats.
func jsonNode(v any) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		// Sorted keys keep the first error reported stable.
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, jsonNode(v[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v {
			n.Content = append(n.Content, jsonNode(e))
		}
		return n
	case json.Number:
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: string(v)}
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: string(v)}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	default: // nil
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
}

// parser walks a document in the xdsbridge format; dropped collects the
// endpoints it leaves out.
type parser struct{ dropped *Dropped }

// errUnservable marks an endpoint that is well formed but cannot be served,
// which is left out of its service rather than failing the document.
var errUnservable = errors.New("cannot be served")

// fail returns the error for the field at path, with n's line when known.
func fail(path string, n *yaml.Node, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if n != nil && n.Line > 0 {
		err = fmt.Errorf("%w (line %d)", err, n.Line)
	}
	return &settings.KeyError{Key: path, Err: err}
}

// fields calls fn for each key of the mapping n, rejecting keys not in
// known and any non-mapping node.
func fields(path string, n *yaml.Node, known []string, fn func(key string, v *yaml.Node) error) error {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return fail(path, n, "want a mapping, got %s", describe(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		key := join(path, k.Value)
		found := false
		for _, f := range known {
			found = found || f == k.Value
		}
		if !found {
			return fail(key, k, "unknown field")
		}
		if err := fn(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	default:
		return "nothing"
	}
}

// list returns the items of the sequence n; null is an empty list.
func list(path string, n *yaml.Node) ([]*yaml.Node, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fail(path, n, "want a list, got %s", describe(n))
	}
	return n.Content, nil
}

// text returns the scalar n as a string. Numbers and booleans are accepted
// as written (a metadata value of 1 is "1").
func text(path string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return "", fail(path, n, "want a string, got %s", describe(n))
	}
	return n.Value, nil
}

// integer returns the integer scalar n, checked against lo..hi.
func integer(path string, n *yaml.Node, lo, hi int64) (int64, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, fail(path, n, "want an integer, got %s", describe(n))
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil || v < lo || v > hi {
		return 0, fail(path, n, "%s is outside %d..%d", n.Value, lo, hi)
	}
	return v, nil
}

func (p parser) document(root *yaml.Node) ([]sources.Service, error) {
	var items []*yaml.Node
	seen := false
	err := fields("", root, []string{"services"}, func(_ string, v *yaml.Node) (err error) {
		seen = true
		items, err = list("services", v)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !seen {
		return nil, fail("services", nil, "is required")
	}
	svcs := make([]sources.Service, 0, len(items))
	index := make(map[string]int, len(items))
	for i, item := range items {
		path := fmt.Sprintf("services[%d]", i)
		s, err := p.service(path, item)
		if err != nil {
			return nil, err
		}
		if j, dup := index[s.Name]; dup {
			return nil, fail(path+".name", item, "duplicate service %q (also services[%d])", s.Name, j)
		}
		index[s.Name] = i
		svcs = append(svcs, s)
	}
	return svcs, nil
}

func (p parser) service(path string, n *yaml.Node) (sources.Service, error) {
	var s sources.Service
	s.Endpoints = []sources.Endpoint{} // present and empty, not absent
	err := fields(path, n, []string{"name", "endpoints"}, func(key string, v *yaml.Node) error {
		switch key {
		case "name":
			name, err := text(path+".name", v)
			s.Name = name
			return err
		default:
			items, err := list(path+".endpoints", v)
			if err != nil {
				return err
			}
			where := map[string]int{}
			for i, item := range items {
				epath := fmt.Sprintf("%s.endpoints[%d]", path, i)
				e, err := p.endpoint(epath, item)
				if errors.Is(err, errUnservable) {
					*p.dropped = append(*p.dropped, err)
					continue
				}
				if err != nil {
					return err
				}
				hostPort := e.Address + ":" + strconv.Itoa(int(e.Port))
				if j, dup := where[hostPort]; dup {
					return fail(epath, item, "duplicate endpoint %s (also endpoints[%d])", hostPort, j)
				}
				where[hostPort] = i
				s.Endpoints = append(s.Endpoints, e)
			}
			return nil
		}
	})
	if err != nil {
		return s, err
	}
	if s.Name == "" {
		return s, fail(path+".name", n, "is required")
	}
	s.Sort()
	return s, nil
}

func (p parser) endpoint(path string, n *yaml.Node) (sources.Endpoint, error) {
	e := sources.Endpoint{Weight: 1, Health: sources.HealthHealthy, Origin: sources.Origin{Record: path}}
	var hasAddr, hasPort bool
	var unservable error
	known := []string{"address", "port", "weight", "priority", "health", "locality", "metadata"}
	err := fields(path, n, known, func(key string, v *yaml.Node) error {
		kpath := join(path, key)
		switch key {
		case "address":
			hasAddr = true
			a, err := text(kpath, v)
			if err != nil {
				return err
			}
			if _, err := netip.ParseAddr(a); err != nil {
				unservable = fail(kpath, v, "%q is not an IP address: %w", a, errUnservable)
			}
			e.Address = a
		case "port":
			hasPort = true
			port, err := integer(kpath, v, 1, 65535)
			e.Port = uint32(port)
			return err
		case "weight":
			w, err := integer(kpath, v, 1, math.MaxUint32)
			e.Weight = uint32(w)
			return err
		case "priority":
			pr, err := integer(kpath, v, 0, math.MaxUint32)
			e.Priority = uint32(pr)
			return err
		case "health":
			h, err := text(kpath, v)
			if err != nil {
				return err
			}
			if e.Health, err = sources.ParseHealth(h); err != nil {
				return fail(kpath, v, "%v", err)
			}
		case "locality":
			return p.locality(kpath, v, &e.Locality)
		case "metadata":
			return p.metadata(kpath, v, &e.Metadata)
		}
		return nil
	})
	switch {
	case err != nil:
	case !hasAddr:
		err = fail(path+".address", n, "is required")
	case !hasPort:
		err = fail(path+".port", n, "is required")
	case unservable != nil:
		err = unservable
	}
	return e, err
}

func (p parser) locality(path string, n *yaml.Node, l *sources.Locality) error {
	if isNull(n) {
		return nil
	}
	return fields(path, n, []string{"region", "zone", "sub_zone"}, func(key string, v *yaml.Node) error {
		s, err := text(join(path, key), v)
		switch key {
		case "region":
			l.Region = s
		case "zone":
			l.Zone = s
		default:
			l.SubZone = s
		}
		return err
	})
}

func (p parser) metadata(path string, n *yaml.Node, md *map[string]string) error {
	if n = deref(n); n.Kind == yaml.MappingNode {
		*md = make(map[string]string, len(n.Content)/2)
	}
	return stringMap(path, n, func(k *yaml.Node, v string) error {
		(*md)[k.Value] = v
		return nil
	})
}

// stringMap calls fn with each key of the mapping n and its value as text
// (see text); null is an empty mapping.
func stringMap(path string, n *yaml.Node, fn func(k *yaml.Node, v string) error) error {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fail(path, n, "want a mapping, got %s", describe(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		v, err := text(join(path, k.Value), deref(n.Content[i+1]))
		if err != nil {
			return err
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}
