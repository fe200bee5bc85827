package builtin

import (
	"fmt"
	"maps"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
)

// mapping is one item of the metadata transform's `set` list: endpoints
// with Tag get Key=Value; or Key gets the value of metadata key From.
type mapping struct {
	Tag   string `mapstructure:"tag"`
	From  string `mapstructure:"from"`
	Key   string `mapstructure:"key"`
	Value string `mapstructure:"value"`
}

// value returns what m sets on e, and false when it sets nothing.
func (m mapping) value(e sources.Endpoint) (string, bool) {
	if m.Tag != "" {
		return m.Value, e.HasTag(m.Tag)
	}
	v, ok := e.Metadata[m.From]
	return v, ok
}

// metadata maps tags and metadata keys to metadata keys, which Envoy reads
// from filter_metadata["envoy.lb"] (subset load balancing).
type metadata struct {
	name string
	sel  sources.Selector
	set  []mapping
}

// changes returns e's metadata after the mappings, and whether it differs.
func (m metadata) changes(e sources.Endpoint) (map[string]string, bool) {
	var md map[string]string
	for _, s := range m.set {
		v, ok := s.value(e)
		if !ok {
			continue
		}
		if cur, has := e.Metadata[s.Key]; md == nil && has && cur == v {
			continue
		}
		if md == nil {
			md = maps.Clone(e.Metadata)
			if md == nil {
				md = map[string]string{}
			}
		}
		md[s.Key] = v
	}
	return md, md != nil && !maps.Equal(md, e.Metadata)
}

func (m metadata) Service(svc sources.Service) (sources.Service, bool) {
	if !m.sel.MatchName(svc) {
		return svc, true
	}
	match := func(e sources.Endpoint) bool {
		_, changed := m.changes(e)
		return m.sel.MatchEndpoint(e) && changed
	}
	return transform.Each(svc, m.name, match, func(e *sources.Endpoint) { e.Metadata, _ = m.changes(*e) }), true
}

func init() {
	register("metadata", func(cfg map[string]any, opts transform.Options) (transform.Transform, error) {
		var c struct {
			selected `mapstructure:",squash"`
			Set      []mapping `mapstructure:"set"`
		}
		if err := decode(cfg, &c, &c.Selector); err != nil {
			return nil, err
		}
		if len(c.Set) == 0 {
			return nil, settings.Errorf("set", "at least one mapping is required")
		}
		for i, s := range c.Set {
			key := fmt.Sprintf("set[%d]", i)
			switch {
			case s.Key == "":
				return nil, settings.Errorf(key+".key", "is required")
			case (s.Tag == "") == (s.From == ""):
				return nil, settings.Errorf(key, "set exactly one of tag and from")
			case s.From != "" && s.Value != "":
				return nil, settings.Errorf(key+".value", "only goes with tag (from copies the value)")
			case s.Tag != "" && s.Value == "":
				c.Set[i].Value = "true"
			}
		}
		return metadata{name: opts.Name, sel: c.Selector, set: c.Set}, nil
	})
}
