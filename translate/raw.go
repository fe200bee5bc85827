package translate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/settings"
)

// Raw are the Envoy resources of one file of raw resources, each list in
// the order written.
type Raw struct {
	Listeners []*listenerv3.Listener
	Routes    []*routev3.RouteConfiguration
	Clusters  []*clusterv3.Cluster
	Secrets   []*tlsv3.Secret
}

// RawError is a mistake in a file of raw resources: the file, the line
// (0 when unknown), the key path of the offending value from the top of
// the document, and what is wrong.
type RawError struct {
	File string
	Line int
	Key  string
	Err  error
}

func (e *RawError) Error() string {
	where := e.File
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	if e.Key == "" {
		return where + ": " + e.Err.Error()
	}
	return where + ": " + e.Key + ": " + e.Err.Error()
}

func (e *RawError) Unwrap() error { return e.Err }

// rawLists are the lists a file of raw resources may hold, as an Envoy
// bootstrap's static_resources holds listeners, clusters and secrets;
// routes are RouteConfigurations (for listeners that take them by RDS),
// and resources are any of those as Anys with "@type", as a
// DiscoveryResponse lists them.
var rawLists = []string{"listeners", "routes", "clusters", "secrets", "resources"}

// ParseRaw reads a file of raw Envoy resources (YAML or JSON; file names
// it in errors): the lists of rawLists at the top of the document or under
// static_resources, each resource written as in an Envoy configuration,
// so that a static bootstrap's static_resources block can be used as it
// is. Every resource must decode, have a name unique in its type, and
// pass validation (ValidateAll); the first mistake is a *RawError naming
// the file, the line and the key path, and the file is rejected whole.
// A mistake under a sensitive field (a private key) does not quote the
// value.
func ParseRaw(file string, data []byte) (Raw, error) {
	fail := func(root *yaml.Node, key string, err error) (Raw, error) {
		if ke, ok := errors.AsType[*settings.KeyError](err); ok {
			key, err = ke.Key, ke.Err
		}
		return Raw{}, &RawError{File: file, Line: lineOf(root, key), Key: key, Err: err}
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return Raw{}, &RawError{File: file, Err: fmt.Errorf("parsing: %w", err)}
	}
	if len(doc.Content) == 0 {
		return Raw{}, nil
	}
	root := doc.Content[0]
	var top map[string]any
	if err := root.Decode(&top); err != nil {
		return fail(root, "", errors.New("the document must be a map of lists (listeners, routes, clusters, secrets, resources)"))
	}
	prefix := ""
	if sr, ok := top["static_resources"]; ok {
		if len(top) > 1 {
			others := slices.Sorted(maps.Keys(top))
			return fail(root, "", fmt.Errorf("static_resources must be alone at the top, not beside %v", slices.DeleteFunc(others, func(k string) bool { return k == "static_resources" })))
		}
		m, ok := sr.(map[string]any)
		if !ok {
			return fail(root, "static_resources", errors.New("must be a map of lists"))
		}
		top, prefix = m, "static_resources."
	}
	var r Raw
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(rawLists, k) {
			return fail(root, prefix+k, fmt.Errorf("unknown key (want %s)", strings.Join(rawLists, ", ")))
		}
	}
	for _, list := range rawLists {
		v, ok := top[list]
		if !ok || v == nil {
			continue
		}
		items, ok := v.([]any)
		if !ok {
			return fail(root, prefix+list, errors.New("must be a list"))
		}
		for i, item := range items {
			key := fmt.Sprintf("%s%s[%d]", prefix, list, i)
			if err := r.add(list, item, key); err != nil {
				return fail(root, key, err)
			}
		}
	}
	if err := r.unique(); err != nil {
		if ke, ok := errors.AsType[*settings.KeyError](err); ok {
			ke.Key = prefix + ke.Key
		}
		return fail(root, "", err)
	}
	return r, nil
}

// add decodes item, a resource of list, and appends it. Errors are
// *settings.KeyError values whose keys are full paths from the top.
func (r *Raw) add(list string, item any, key string) error {
	var m proto.Message
	switch list {
	case "listeners":
		m = &listenerv3.Listener{}
	case "routes":
		m = &routev3.RouteConfiguration{}
	case "clusters":
		m = &clusterv3.Cluster{}
	case "secrets":
		m = &tlsv3.Secret{}
	default:
		a := &anypb.Any{}
		if err := decodeRaw(a, item, key); err != nil {
			return err
		}
		var err error
		if m, err = a.UnmarshalNew(); err != nil {
			return settings.Errorf(key, "%v", err)
		}
		return r.append(m, key)
	}
	if err := decodeRaw(m, item, key); err != nil {
		return err
	}
	return r.append(m, key)
}

// append validates m and adds it to its list.
func (r *Raw) append(m proto.Message, key string) error {
	switch m.(type) {
	case *listenerv3.Listener, *routev3.RouteConfiguration, *clusterv3.Cluster, *tlsv3.Secret:
	default:
		return settings.Errorf(key+".@type", "%s is not served from files (want a Listener, RouteConfiguration, Cluster or Secret)", proto.MessageName(m))
	}
	if rawName(m) == "" {
		return settings.Errorf(key+".name", "is required")
	}
	type validator interface{ ValidateAll() error }
	if err := m.(validator).ValidateAll(); err != nil {
		return invalidMessage(key, "the resource", m.ProtoReflect().Descriptor(), err)
	}
	switch m := m.(type) {
	case *listenerv3.Listener:
		r.Listeners = append(r.Listeners, m)
	case *routev3.RouteConfiguration:
		r.Routes = append(r.Routes, m)
	case *clusterv3.Cluster:
		r.Clusters = append(r.Clusters, m)
	case *tlsv3.Secret:
		r.Secrets = append(r.Secrets, m)
	}
	return nil
}

// rawName is the name of a raw resource.
func rawName(m proto.Message) string {
	if n, ok := m.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	return ""
}

// unique checks that no two resources of one type share a name.
func (r *Raw) unique() error {
	check := func(list string, names []string) error {
		seen := map[string]int{}
		for i, n := range names {
			if j, dup := seen[n]; dup {
				return settings.Errorf(fmt.Sprintf("%s[%d].name", list, i), "%q is also the name of %s[%d]", n, list, j)
			}
			seen[n] = i
		}
		return nil
	}
	return cmp.Or(
		check("listeners", names(r.Listeners)),
		check("routes", names(r.Routes)),
		check("clusters", names(r.Clusters)),
		check("secrets", names(r.Secrets)),
	)
}

func names[M interface{ GetName() string }](list []M) []string {
	out := make([]string, len(list))
	for i, m := range list {
		out[i] = m.GetName()
	}
	return out
}

// decodeRaw decodes one resource as written into m.
func decodeRaw(m proto.Message, item any, key string) error {
	md := m.ProtoReflect().Descriptor()
	norm, err := normalize(md, item, key)
	if err != nil {
		return err
	}
	b, err := json.Marshal(norm)
	if err != nil {
		return settings.Errorf(key, "%v", err)
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return settings.Errorf(key, "%s", protojsonPosition.ReplaceAllString(err.Error(), ""))
	}
	return nil
}

// lineOf is the line of the value at key (a path such as
// "listeners[0].filter_chains[1].filters[0].typed_config") in the YAML
// tree, or of its nearest parent written; 0 when root is nil. Keys match
// whether written in snake_case or lowerCamelCase.
func lineOf(root *yaml.Node, key string) int {
	if root == nil {
		return 0
	}
	n, line := root, root.Line
	for _, step := range keySteps(key) {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *yaml.Node
		switch {
		case step.index >= 0 && n.Kind == yaml.SequenceNode && step.index < len(n.Content):
			next = n.Content[step.index]
		case step.index < 0 && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if flatKey(n.Content[i].Value) == flatKey(step.name) {
					next = n.Content[i+1]
					line = n.Content[i].Line
					break
				}
			}
		}
		if next == nil {
			return line
		}
		n = next
		if step.index >= 0 {
			line = n.Line
		}
	}
	return line
}

type keyStep struct {
	name  string
	index int // -1 for a name
}

// keySteps splits a key path into names and list indexes.
func keySteps(key string) []keyStep {
	var out []keyStep
	for part := range strings.SplitSeq(key, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, keyStep{name: name, index: -1})
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			if i, err := strconv.Atoi(idx); err == nil {
				out = append(out, keyStep{index: i})
			} else {
				out = append(out, keyStep{name: idx, index: -1}) // a map key
			}
			_, rest, _ = strings.Cut(after, "[")
		}
	}
	return out
}

// flatKey compares snake_case and lowerCamelCase spellings of a key.
func flatKey(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
