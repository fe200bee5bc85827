package config

import (
	"fmt"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/translate/istio"
)

// Istio configures the translation of the services into Istio
// ServiceEntries (and WorkloadEntries) for istiod's MCP-over-xDS config
// sources (translate/istio).
type Istio struct {
	Enabled         bool     `mapstructure:"enabled"`
	Shape           string   `mapstructure:"shape"`
	Host            string   `mapstructure:"host"`
	ProtocolKey     string   `mapstructure:"protocol_key"`
	DefaultProtocol string   `mapstructure:"default_protocol"`
	DefaultPort     uint16   `mapstructure:"default_port"`
	Location        string   `mapstructure:"location"`
	Namespace       string   `mapstructure:"namespace"`
	ExportTo        []string `mapstructure:"export_to"`
	// Rules are the per-service rules as written (re-read from the file,
	// like the clusters list, because their metadata keys keep their case).
	Rules []map[string]any `mapstructure:"rules"`

	// Translator is built from the settings above by Validate.
	Translator *istio.Translator `mapstructure:"-"`
}

// rawIstioRules returns istio.rules from the file's raw content.
func rawIstioRules(raw map[string]any) ([]map[string]any, error) {
	section, ok := raw["istio"].(map[string]any)
	if !ok {
		return nil, nil // absent, or not a map: decoding reports it
	}
	rules, err := listOfMaps(section, "rules")
	return rules, settings.Prefix("istio", err)
}

// validateIstio checks the istio section and builds its Translator.
func (c *Config) validateIstio() error {
	opts := istio.Options{
		Shape:           istio.Shape(c.Istio.Shape),
		Host:            c.Istio.Host,
		ProtocolKey:     c.Istio.ProtocolKey,
		DefaultProtocol: c.Istio.DefaultProtocol,
		DefaultPort:     c.Istio.DefaultPort,
		Location:        c.Istio.Location,
		Namespace:       c.Istio.Namespace,
		ExportTo:        c.Istio.ExportTo,
	}
	for _, key := range []struct{ name, value string }{
		{"shape", c.Istio.Shape}, {"host", c.Istio.Host}, {"protocol_key", c.Istio.ProtocolKey},
		{"default_protocol", c.Istio.DefaultProtocol}, {"location", c.Istio.Location}, {"namespace", c.Istio.Namespace},
	} {
		// An empty value would silently mean the default; say so instead.
		if key.value == "" {
			return settings.Errorf("istio."+key.name, `"" is not allowed: remove the key for its default, %q`, defaults["istio."+key.name])
		}
	}
	if c.Istio.DefaultPort == 0 {
		return settings.Errorf("istio.default_port", "0 is not a port (want 1 to 65535; remove the key for its default, %d)", istio.DefaultPort)
	}
	for i, raw := range c.Istio.Rules {
		var r istio.Rule
		if err := settings.Decode(raw, &r); err != nil {
			return settings.Prefix(fmt.Sprintf("istio.rules[%d]", i), err)
		}
		opts.Rules = append(opts.Rules, r)
	}
	t, err := istio.New(opts)
	if err != nil {
		return settings.Prefix("istio", err)
	}
	c.Istio.Translator = t
	return nil
}
