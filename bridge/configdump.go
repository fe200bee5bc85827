package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/xds"
)

// dumpOrder is the order of the per-type dumps in a ConfigDump, Envoy's:
// clusters, listeners, routes, secrets, then endpoints.
var dumpOrder = []string{resource.ClusterType, resource.ListenerType, resource.RouteType, resource.SecretType, resource.EndpointType}

// DumpOptions say what a ConfigDump shows besides the resources.
type DumpOptions struct {
	// Node, when set, is shown as the bootstrap's node, first, as Envoy
	// does: the client the resources are for.
	Node *corev3.Node
	// Types are the type URLs to show; a type of them without resources
	// gets its empty dump. Empty means every type that has resources.
	Types []string
	// Versions are the version_info of each type's dump: the version of
	// the latest response of that type the client ACKed, if known.
	Versions map[string]string
}

// ConfigDump arranges d the way Envoy's /config_dump does
// (envoy.admin.v3.ConfigDump): a BootstrapConfigDump holding the node, then
// one ClustersConfigDump (dynamic_active_clusters), ListenersConfigDump
// (dynamic_listeners, their active_state), RoutesConfigDump
// (dynamic_route_configs), SecretsConfigDump (dynamic_active_secrets, private
// keys redacted by whoever made d) and EndpointsConfigDump
// (dynamic_endpoint_configs) per type, each resource with its version_info. Resources of other types
// are left out. The bridge does not record when a client got a resource,
// so last_updated is not set.
func ConfigDump(d xds.Dump, opts DumpOptions) (*adminv3.ConfigDump, error) {
	var msgs []proto.Message
	if opts.Node != nil {
		msgs = append(msgs, &adminv3.BootstrapConfigDump{Bootstrap: &bootstrapv3.Bootstrap{Node: opts.Node}})
	}
	for _, url := range dumpOrder {
		show := len(d[url]) > 0
		if len(opts.Types) > 0 {
			show = slices.Contains(opts.Types, url)
		}
		if show {
			msgs = append(msgs, typeDump(url, opts.Versions[url], d[url]))
		}
	}
	cd := &adminv3.ConfigDump{}
	for _, m := range msgs {
		a, err := anypb.New(m)
		if err != nil {
			return nil, fmt.Errorf("packing %s: %w", proto.MessageName(m), err)
		}
		cd.Configs = append(cd.Configs, a)
	}
	return cd, nil
}

// typeDump is the dump of one type's resources; url is one of dumpOrder.
func typeDump(url, version string, list []xds.Dumped) proto.Message {
	switch url {
	case resource.ClusterType:
		m := &adminv3.ClustersConfigDump{VersionInfo: version}
		for _, r := range list {
			m.DynamicActiveClusters = append(m.DynamicActiveClusters,
				&adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: r.Version, Cluster: r.Resource})
		}
		return m
	case resource.ListenerType:
		m := &adminv3.ListenersConfigDump{VersionInfo: version}
		for _, r := range list {
			m.DynamicListeners = append(m.DynamicListeners, &adminv3.ListenersConfigDump_DynamicListener{
				Name:        r.Name,
				ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: r.Version, Listener: r.Resource},
			})
		}
		return m
	case resource.RouteType:
		m := &adminv3.RoutesConfigDump{}
		for _, r := range list {
			m.DynamicRouteConfigs = append(m.DynamicRouteConfigs,
				&adminv3.RoutesConfigDump_DynamicRouteConfig{VersionInfo: r.Version, RouteConfig: r.Resource})
		}
		return m
	case resource.SecretType:
		m := &adminv3.SecretsConfigDump{}
		for _, r := range list {
			m.DynamicActiveSecrets = append(m.DynamicActiveSecrets,
				&adminv3.SecretsConfigDump_DynamicSecret{Name: r.Name, VersionInfo: r.Version, Secret: r.Resource})
		}
		return m
	default:
		m := &adminv3.EndpointsConfigDump{}
		for _, r := range list {
			m.DynamicEndpointConfigs = append(m.DynamicEndpointConfigs,
				&adminv3.EndpointsConfigDump_DynamicEndpointConfig{VersionInfo: r.Version, EndpointConfig: r.Resource})
		}
		return m
	}
}

// Unpack is ConfigDump's inverse: the resources of cd by type URL, in
// order, and the options that describe them (the bootstrap's node, the
// per-type versions, the types present). Configs of other types are
// skipped.
func Unpack(cd *adminv3.ConfigDump) (xds.Dump, DumpOptions, error) {
	d := xds.Dump{}
	opts := DumpOptions{Versions: map[string]string{}}
	typ := func(url, version string) {
		opts.Types = append(opts.Types, url)
		if version != "" {
			opts.Versions[url] = version
		}
	}
	add := func(url, name, version string, a *anypb.Any) {
		if name == "" {
			name = resourceName(a)
		}
		d[url] = append(d[url], xds.Dumped{Name: name, Version: version, Resource: a})
	}
	for _, a := range cd.GetConfigs() {
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, DumpOptions{}, fmt.Errorf("unpacking %s: %w", a.GetTypeUrl(), err)
		}
		switch m := m.(type) {
		case *adminv3.BootstrapConfigDump:
			opts.Node = m.GetBootstrap().GetNode()
		case *adminv3.ClustersConfigDump:
			typ(resource.ClusterType, m.GetVersionInfo())
			for _, c := range m.GetDynamicActiveClusters() {
				add(resource.ClusterType, "", c.GetVersionInfo(), c.GetCluster())
			}
		case *adminv3.ListenersConfigDump:
			typ(resource.ListenerType, m.GetVersionInfo())
			for _, l := range m.GetDynamicListeners() {
				add(resource.ListenerType, l.GetName(), l.GetActiveState().GetVersionInfo(), l.GetActiveState().GetListener())
			}
		case *adminv3.RoutesConfigDump:
			typ(resource.RouteType, "")
			for _, r := range m.GetDynamicRouteConfigs() {
				add(resource.RouteType, "", r.GetVersionInfo(), r.GetRouteConfig())
			}
		case *adminv3.SecretsConfigDump:
			typ(resource.SecretType, "")
			for _, sec := range m.GetDynamicActiveSecrets() {
				add(resource.SecretType, sec.GetName(), sec.GetVersionInfo(), sec.GetSecret())
			}
		case *adminv3.EndpointsConfigDump:
			typ(resource.EndpointType, "")
			for _, e := range m.GetDynamicEndpointConfigs() {
				add(resource.EndpointType, "", e.GetVersionInfo(), e.GetEndpointConfig())
			}
		}
	}
	return d, opts, nil
}

// Resource is Envoy's /config_dump?resource=FIELD form of cd: the elements
// of the repeated field FIELD (dynamic_active_clusters, dynamic_listeners,
// dynamic_route_configs, dynamic_endpoint_configs) of its configs, each
// packed on its own. It is an error when no config has such a field.
func Resource(cd *adminv3.ConfigDump, field string) (*adminv3.ConfigDump, error) {
	out := &adminv3.ConfigDump{}
	found := false
	for _, a := range cd.GetConfigs() {
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("unpacking %s: %w", a.GetTypeUrl(), err)
		}
		fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(field))
		if fd == nil || !fd.IsList() || fd.Kind() != protoreflect.MessageKind {
			continue
		}
		found = true
		list := m.ProtoReflect().Get(fd).List()
		for i := range list.Len() {
			elem, err := anypb.New(list.Get(i).Message().Interface())
			if err != nil {
				return nil, fmt.Errorf("packing %s: %w", field, err)
			}
			out.Configs = append(out.Configs, elem)
		}
	}
	if !found {
		return nil, fmt.Errorf("no config of this dump has a resource field %q", field)
	}
	return out, nil
}

// resourceName is the name of a packed cluster, listener, route
// configuration or assignment, empty if it has none.
func resourceName(a *anypb.Any) string {
	m, err := a.UnmarshalNew()
	if err != nil {
		return ""
	}
	switch m := m.(type) {
	case interface{ GetName() string }:
		return m.GetName()
	case interface{ GetClusterName() string }:
		return m.GetClusterName()
	}
	return ""
}

// Render prints m as Envoy's admin API does: proto JSON with the proto
// field names (snake_case), fields in proto order, indented by two spaces;
// or the same as YAML in block style. Output is deterministic.
func Render(m proto.Message, yamlOut bool) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", proto.MessageName(m), err)
	}
	// protojson varies its whitespace on purpose; indenting rewrites all of
	// it, which makes the output stable for diffs.
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("indenting %s: %w", proto.MessageName(m), err)
	}
	if !yamlOut {
		b.WriteByte('\n')
		return b.Bytes(), nil
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b.Bytes(), &n); err != nil {
		return nil, fmt.Errorf("converting %s to YAML: %w", proto.MessageName(m), err)
	}
	blockStyle(&n)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("converting %s to YAML: %w", proto.MessageName(m), err)
	}
	return out.Bytes(), nil
}

// blockStyle turns the flow style of parsed JSON into YAML's block style,
// keeping quotes only where YAML needs them.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
