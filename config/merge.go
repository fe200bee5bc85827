package config

import "github.com/xdsbridge/xdsbridge/sources"

// validateMerge checks the merge section against the configured sources.
func (c *Config) validateMerge() error {
	names := make([]string, len(c.Entries))
	for i, s := range c.Entries {
		names[i] = s.Name
	}
	return sources.Prefix("merge", c.Merge.Validate(names))
}
