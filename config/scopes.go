package config

import (
	"fmt"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
)

// scopesSection is the `scopes` key as written.
type scopesSection struct {
	// Default is what a node no rule matches receives on a wildcard: all
	// (every service, as without scopes) or none (only what it names).
	Default string       `mapstructure:"default"`
	Rules   []scopeEntry `mapstructure:"rules"`
}

type scopeEntry struct {
	Name     string             `mapstructure:"name"`
	Node     nodeMatch          `mapstructure:"node"`
	Services []sources.Selector `mapstructure:"services"`
	Deny     []sources.Selector `mapstructure:"deny"`
}

type nodeMatch struct {
	ID       string            `mapstructure:"id"`
	Cluster  string            `mapstructure:"cluster"`
	Metadata map[string]string `mapstructure:"metadata"`
	Locality struct {
		Region  string `mapstructure:"region"`
		Zone    string `mapstructure:"zone"`
		SubZone string `mapstructure:"sub_zone"`
	} `mapstructure:"locality"`
}

// validateScopes builds the per-node scoping rules into ScopeRules (nil
// when the section is absent: every node gets every service).
func (c *Config) validateScopes() error {
	c.ScopeRules = nil
	if c.Scopes == nil {
		return nil
	}
	var sec scopesSection
	if err := settings.Decode(c.Scopes, &sec); err != nil {
		return settings.Prefix("scopes", err)
	}
	var def *translate.Scope
	switch sec.Default {
	case "", "all":
	case "none":
		def = &translate.Scope{Name: translate.DefaultScopeName, Services: []sources.Selector{}}
	default:
		return settings.Errorf("scopes.default", "%q is not allowed (want all or none)", sec.Default)
	}
	rules := make([]translate.Scope, 0, len(sec.Rules))
	for i, r := range sec.Rules {
		s := translate.Scope{
			Name: r.Name,
			Node: translate.NodeMatch{ID: r.Node.ID, Cluster: r.Node.Cluster, Metadata: r.Node.Metadata,
				Locality: sources.Locality(r.Node.Locality)},
			Services: r.Services,
			Deny:     r.Deny,
		}
		// An absent services key delivers everything; an empty list,
		// nothing by wildcard.
		if raw, ok := c.ruleRaw(i)["services"]; ok && s.Services == nil {
			if raw != nil {
				if _, isList := raw.([]any); !isList {
					return settings.Errorf(fmt.Sprintf("scopes.rules[%d].services", i), "%v", scalar.Mismatch("a list of selectors", raw))
				}
			}
			s.Services = []sources.Selector{}
		}
		rules = append(rules, s)
	}
	scopes, err := translate.NewScopes(rules, def)
	if err != nil {
		return settings.Prefix("scopes", err)
	}
	c.ScopeRules = scopes
	return nil
}

// ruleRaw is rule i of scopes.rules as written (nil if not a map).
func (c *Config) ruleRaw(i int) map[string]any {
	list, _ := c.Scopes["rules"].([]any)
	if i >= len(list) {
		return nil
	}
	m, _ := list[i].(map[string]any)
	return m
}
