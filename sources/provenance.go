package sources

import "strings"

// Origin is the provenance of one endpoint: which configured source reported
// it, which registry record it was read from, and which transforms changed
// it on its way to translation. It is what /debug/why and `bridge dump`
// show to explain a cluster; translation ignores it, so it never reaches a
// client.
type Origin struct {
	// Source is the configured name of the source; the manager sets it.
	Source string
	// Record names the registry record in the source's own words, such as
	// `services.yaml: services[0].endpoints[1]` or `SRV _api._tcp.example.org`.
	// Sources fill it where they can; it may be empty.
	Record string
	// Transforms are the names of the transforms that changed the endpoint,
	// in the order they ran.
	Transforms []string
}

// MetaTags is the metadata key that carries an endpoint's registry tags,
// comma-separated (the Consul source writes its instance tags there; a file
// may set it by hand). Tag matching in transforms and cluster shaping reads
// it.
const MetaTags = "tags"

// Tags returns the endpoint's tags (see MetaTags).
func (e Endpoint) Tags() []string {
	t := e.Metadata[MetaTags]
	if t == "" {
		return nil
	}
	return strings.Split(t, ",")
}

// HasTag reports whether tag is one of the endpoint's tags.
func (e Endpoint) HasTag(tag string) bool {
	for t := range strings.SplitSeq(e.Metadata[MetaTags], ",") {
		if t == tag {
			return true
		}
	}
	return false
}
