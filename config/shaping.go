package config

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
	"github.com/xdsbridge/xdsbridge/translate"
)

// rawLists re-reads the `clusters`, `transforms`, `routes`, `listeners`,
// `secrets`, `resources` and `istio.rules` lists and the `scopes` section
// from the file's text. Viper lower-cases every
// map key, and these sections hold keys whose case matters: Envoy
// extension names in typed_extension_protocol_options, metadata keys,
// template field names.
func (c *Config) rawLists(data []byte) error {
	var raw map[string]any
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&raw); err != nil {
		return fmt.Errorf("parsing config file: %w", err)
	}
	var err error
	if c.Clusters, err = listOfMaps(raw, "clusters"); err != nil {
		return err
	}
	if c.Transforms, err = listOfMaps(raw, "transforms"); err != nil {
		return err
	}
	// Route and listener fragments hold Envoy extension names and header
	// names; secrets and resources name files.
	for key, list := range map[string]*[]map[string]any{
		"routes": &c.Routes, "listeners": &c.Listeners, "secrets": &c.Secrets, "resources": &c.Resources,
	} {
		if *list, err = listOfMaps(raw, key); err != nil {
			return err
		}
	}
	// Scopes hold metadata keys too.
	switch v := raw["scopes"].(type) {
	case nil:
		c.Scopes = nil
	case map[string]any:
		c.Scopes = v
	default:
		return settings.Errorf("scopes", "%v", scalar.Mismatch("a map", v))
	}
	c.Istio.Rules, err = rawIstioRules(raw)
	return err
}

// listOfMaps returns raw[key] as a list of maps; absent or null is empty.
func listOfMaps(raw map[string]any, key string) ([]map[string]any, error) {
	v, ok := raw[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, settings.Errorf(key, "%v", scalar.Mismatch("a list", v))
	}
	out := make([]map[string]any, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, settings.Errorf(fmt.Sprintf("%s[%d]", key, i), "%v", scalar.Mismatch("a map", item))
		}
		out = append(out, m)
	}
	return out, nil
}

// rule is one entry of the `clusters` list before its fragment is parsed.
type rule struct {
	Match   sources.Selector `mapstructure:"match"`
	Clients string           `mapstructure:"clients"`
	Cluster map[string]any   `mapstructure:"cluster"`
}

// validateShaping builds the cluster shaping rules and the transform chain,
// keeping them in Shaping and Chain.
func (c *Config) validateShaping() error {
	c.Shaping = &translate.Shaping{}
	for i, raw := range c.Clusters {
		key := fmt.Sprintf("clusters[%d]", i)
		var r rule
		if err := settings.Decode(raw, &r); err != nil {
			return settings.Prefix(key, err)
		}
		clients, err := translate.ParseClients(r.Clients)
		if err != nil {
			return settings.Prefix(key+".clients", err)
		}
		if len(r.Cluster) == 0 {
			return settings.Errorf(key+".cluster", "is required (an Envoy Cluster fragment)")
		}
		built, err := translate.NewRule(r.Match, clients, r.Cluster)
		if err != nil {
			return settings.Prefix(key, err)
		}
		c.Shaping.Rules = append(c.Shaping.Rules, built)
	}
	entries := make([]transform.Entry, 0, len(c.Transforms))
	for i, raw := range c.Transforms {
		e := transform.Entry{Index: i, Settings: map[string]any{}}
		for k, val := range raw {
			switch k {
			case "name", "type":
				if err := setNameOrType(e.Key(), k, val, &e.Name, &e.Type); err != nil {
					return err
				}
			default:
				e.Settings[k] = val
			}
		}
		entries = append(entries, e)
	}
	var err error
	c.Chain, err = transform.NewChain(entries)
	return err
}
