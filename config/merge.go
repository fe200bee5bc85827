package config

import "github.com/xdsbridge/xdsbridge/settings"

// validateMerge checks the merge section against the configured sources.
func (c *Config) validateMerge() error {
	names := make([]string, len(c.Entries))
	for i, s := range c.Entries {
		names[i] = s.Name
	}
	return settings.Prefix("merge", c.Merge.Validate(names))
}

// checkMergeShape rejects merge.services written as a mapping keyed by
// service name, before decoding would turn it into a one-item list with a
// puzzling "unknown key": the loader lower-cases mapping keys and splits
// them at dots, so service names must be list values.
func checkMergeShape(services any) error {
	if _, isMap := services.(map[string]any); isMap {
		return settings.Errorf("merge.services", "want a list of {service, mode, weights} entries, not a mapping "+
			"(service names are list values because mapping keys lose their case and dots)")
	}
	return nil
}
