package sources

import (
	"fmt"
	"path"
	"slices"

	"github.com/xdsbridge/xdsbridge/settings"
)

// Selector picks services and endpoints for cluster shaping rules and
// transforms. Every field is optional and the empty Selector matches
// everything. Services and Sources are about the service as a whole; Tags
// and Metadata about single endpoints (see MatchEndpoint).
type Selector struct {
	// Services are service-name globs (path.Match syntax: *, ?, [a-z]).
	Services []string `mapstructure:"services"`
	// Sources are configured source names.
	Sources []string `mapstructure:"sources"`
	// Tags must all be among the endpoint's tags (see MetaTags).
	Tags []string `mapstructure:"tags"`
	// Metadata entries must all be present with these values.
	Metadata map[string]string `mapstructure:"metadata"`
}

// Validate checks the globs; errors are *settings.KeyError values relative to the
// selector, such as `services[1]`.
func (s Selector) Validate() error {
	for i, g := range s.Services {
		if _, err := path.Match(g, ""); err != nil {
			return settings.Errorf(fmt.Sprintf("services[%d]", i), "bad glob %q: %v", g, err)
		}
	}
	for i, t := range s.Tags {
		if t == "" {
			return settings.Errorf(fmt.Sprintf("tags[%d]", i), "empty tag")
		}
	}
	return nil
}

// ByEndpoint reports whether the selector looks at endpoints (Tags or
// Metadata set).
func (s Selector) ByEndpoint() bool { return len(s.Tags) > 0 || len(s.Metadata) > 0 }

// MatchName reports whether the service's name and source match; endpoints
// are not looked at.
func (s Selector) MatchName(svc Service) bool {
	if len(s.Sources) > 0 && !slices.Contains(s.Sources, svc.Source) {
		return false
	}
	if len(s.Services) == 0 {
		return true
	}
	for _, g := range s.Services {
		if ok, _ := path.Match(g, svc.Name); ok {
			return true
		}
	}
	return false
}

// MatchService reports whether the service matches as a whole: its name and
// source match and, when the selector looks at endpoints, at least one
// endpoint matches (so a service with no endpoints matches only selectors
// without Tags and Metadata).
func (s Selector) MatchService(svc Service) bool {
	if !s.MatchName(svc) {
		return false
	}
	return !s.ByEndpoint() || slices.ContainsFunc(svc.Endpoints, s.MatchEndpoint)
}

// MatchEndpoint reports whether the endpoint carries every tag and metadata
// entry of the selector.
func (s Selector) MatchEndpoint(e Endpoint) bool {
	for _, t := range s.Tags {
		if !e.HasTag(t) {
			return false
		}
	}
	for k, v := range s.Metadata {
		if got, ok := e.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}
