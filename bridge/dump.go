package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/xds"
)

// collector is an applier that keeps the resources of every Apply.
type collector struct{ upserts []xds.Resource }

func (c *collector) Apply(upserts []xds.Resource, _ []xds.Key) {
	c.upserts = append(c.upserts, upserts...)
}

// Snapshot runs every source of cfg until each has reported its state once,
// then transforms, translates and shapes that state exactly as a running
// bridge does, and returns the resources it would serve. When ctx ends
// first, the error names the sources that had not reported.
func Snapshot(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]xds.Resource, error) {
	named, err := buildSources(cfg, log)
	if err != nil {
		return nil, err
	}
	m := sources.NewManager(sources.ManagerOptions{Sources: named, Merge: cfg.Merge, Logger: log.With("component", "manager")})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var first *sources.Changes
	if err := m.Run(runCtx, func(c sources.Changes) {
		if first == nil {
			first = &c
			cancel()
		}
	}); err != nil {
		return nil, err
	}
	if first == nil {
		return nil, fmt.Errorf("sources did not report before the deadline: %s", strings.Join(m.Pending(), ", "))
	}
	col := &collector{}
	p := newPublisher(col, cfg.XDS.GRPC.Enabled, log.With("component", "publish"), prometheus.NewRegistry())
	p.shape(cfg.Shaping, cfg.Chain).publish(*first)
	return col.upserts, nil
}

// ForClient returns, per type URL, the resources of rs a client of that
// class receives (see xds.Resource.For), limited to types when not empty.
func ForClient(rs []xds.Resource, grpc bool, types ...string) (xds.Dump, error) {
	d := xds.Dump{}
	for _, r := range rs {
		if len(types) > 0 && !slices.Contains(types, r.Type) {
			continue
		}
		m, ok := r.For(grpc)
		if !ok {
			continue
		}
		a, err := anypb.New(m)
		if err != nil {
			return nil, fmt.Errorf("packing %s %q: %w", r.Type, r.Name, err)
		}
		d[r.Type] = append(d[r.Type], a)
	}
	return d, nil
}

// TypeURLs maps the short type names of `bridge dump --type` to type URLs.
var TypeURLs = map[string]string{
	"cds": resource.ClusterType, "eds": resource.EndpointType,
	"lds": resource.ListenerType, "rds": resource.RouteType,
}

// Document is what `bridge dump` prints and /debug/config_dump serves: the
// resources of each type in Envoy's JSON form (each with its "@type").
type Document struct {
	Node      string            `json:"node,omitempty"`
	Client    string            `json:"client,omitempty"` // envoy or grpc
	Clusters  []json.RawMessage `json:"clusters,omitempty"`
	Endpoints []json.RawMessage `json:"endpoints,omitempty"`
	Listeners []json.RawMessage `json:"listeners,omitempty"`
	Routes    []json.RawMessage `json:"routes,omitempty"`
}

// document renders d (resources of the four xDS types; others are left
// out). Within a type, resources keep d's order.
func document(d xds.Dump) (Document, error) {
	var doc Document
	for url, dst := range map[string]*[]json.RawMessage{
		resource.ClusterType: &doc.Clusters, resource.EndpointType: &doc.Endpoints,
		resource.ListenerType: &doc.Listeners, resource.RouteType: &doc.Routes,
	} {
		for _, a := range d[url] {
			b, err := protojson.Marshal(a)
			if err != nil {
				return Document{}, fmt.Errorf("rendering %s: %w", a.TypeUrl, err)
			}
			*dst = append(*dst, b)
		}
	}
	return doc, nil
}

// Render prints d as indented JSON, or YAML (block style, fields in the
// order Envoy's JSON has them). Output is deterministic.
func Render(doc Document, yamlOut bool) ([]byte, error) {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	if !yamlOut {
		return append(b, '\n'), nil
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	blockStyle(&n)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
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

// Dump renders rs as a client of that class receives it; see ForClient and
// Render.
func Dump(rs []xds.Resource, node string, grpc bool, types []string, yamlOut bool) ([]byte, error) {
	d, err := ForClient(rs, grpc, types...)
	if err != nil {
		return nil, err
	}
	doc, err := document(d)
	if err != nil {
		return nil, err
	}
	doc.Node, doc.Client = node, map[bool]string{false: "envoy", true: "grpc"}[grpc]
	return Render(doc, yamlOut)
}
