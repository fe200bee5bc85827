package istio

import (
	"maps"
	"slices"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

// labels returns the workload labels of e, from its metadata and its tags,
// every key and value mapped onto Kubernetes label syntax (see labelKey
// and labelValue): first each metadata entry, by key; then each tag, a
// "key=value" (or "key|value", the form Istio's former Consul registry
// read) tag as that label, any other tag as the label tag: "true". The
// first entry to claim a label key keeps it, so metadata wins over tags.
// Left out: the metadata entry of the joined tags (sources.MetaTags) and
// the "tag:<tag>" entries that mirror single tags, which the tags
// themselves give; and any entry whose key maps onto nothing.
func labels(e *sources.Endpoint) map[string]string {
	tags := e.Tags()
	out := make(map[string]string, len(e.Metadata)+len(tags))
	put := func(k, v string) {
		if k = labelKey(k); k == "" {
			return
		}
		if _, taken := out[k]; !taken {
			out[k] = labelValue(v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Metadata)) {
		if k == sources.MetaTags || mirrorsTag(k, e.Metadata[k], tags) {
			continue
		}
		put(k, e.Metadata[k])
	}
	for _, tag := range tags {
		if k, v, ok := splitTag(tag); ok {
			put(k, v)
		} else {
			put(tag, "true")
		}
	}
	return out
}

// mirrorsTag reports whether the metadata entry k=v is the "tag:<tag>" =
// "true" entry of one of tags (the Consul source writes one per tag for
// Envoy's subset load balancer).
func mirrorsTag(k, v string, tags []string) bool {
	tag, ok := strings.CutPrefix(k, "tag:")
	return ok && v == "true" && slices.Contains(tags, tag)
}

// splitTag splits a "key=value" or "key|value" tag.
func splitTag(tag string) (k, v string, ok bool) {
	i := strings.IndexAny(tag, "=|")
	if i <= 0 {
		return "", "", false
	}
	return tag[:i], tag[i+1:], true
}

// declared returns the protocol e declares (its ProtocolKey metadata
// entry, else a ProtocolKey=value tag) in Istio's spelling; declared is
// false when it declares none, ok false when Istio does not support it
// (p is then the value as written).
func (t *Translator) declared(e *sources.Endpoint) (p string, declared, ok bool) {
	v, found := e.Metadata[t.protocolKey]
	if !found {
		for _, tag := range e.Tags() {
			if k, tv, isKV := splitTag(tag); isKV && k == t.protocolKey {
				v, found = tv, true
				break
			}
		}
	}
	if !found || v == "" {
		return "", false, false
	}
	if p, ok := parseProtocol(v); ok {
		return p, true, true
	}
	return v, true, false
}

// protocolOf returns the protocol of a service: the one most of its
// instances declare (ties go to the first in Istio's list), else the
// default. Every instance counts, healthy or not, so that the service's
// protocol does not change as instances fail their checks; instances that
// declare another protocol are left out (see workload).
func (t *Translator) protocolOf(eps []sources.Endpoint) string {
	counts := make([]int, len(protocols))
	for i := range eps {
		if p, _, ok := t.declared(&eps[i]); ok {
			counts[slices.Index(protocols, p)]++
		}
	}
	best := slices.Index(counts, slices.Max(counts))
	if counts[best] == 0 {
		return t.protocol
	}
	return protocols[best]
}
