package etcd

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

// skydnsPrefix accepts the prefixes of CoreDNS's etcd plugin: absolute,
// the first element being the plugin's path (/skydns by default) and the
// rest domain labels in reverse.
func skydnsPrefix(prefix string) error {
	if !strings.HasPrefix(prefix, "/") || len(prefix) < 3 {
		return errors.New("want the plugin's path and reversed labels, such as /skydns/local/example/")
	}
	return nil
}

// skydnsService names the service of a record by its domain, one level up
// from the record's own name: /skydns/local/example/web/x1 is the record
// x1.web.example.local, an instance of web.example.local (what an SRV
// query for web.example.local returns from CoreDNS).
func skydnsService(_, key string) (string, error) {
	els := strings.Split(strings.TrimPrefix(key, "/"), "/")
	if len(els) < 3 {
		return "", fmt.Errorf("the key names no domain under the plugin's path /%s (want /%s/<tld>/.../<service>/<instance>)", els[0], els[0])
	}
	labels := els[1 : len(els)-1]
	if slices.Contains(els[1:], "") {
		return "", errors.New("the key has an empty label")
	}
	slices.Reverse(labels)
	return strings.Join(labels, "."), nil
}

// skydnsEndpoint reads a record as CoreDNS does (encoding/json: unknown
// fields ignored). A record whose host is an IP address and that has a
// port is an instance: priority becomes the endpoint's priority (SRV
// priority: lower is preferred), weight its weight (0, CoreDNS's "share
// equally", is unset). Mail (MX) records and records without a host
// (TXT) are not instances; a host name is not resolved and such a record
// is dropped.
func skydnsEndpoint(value []byte) (sources.Endpoint, error) {
	var r struct {
		Host     string `json:"host"`
		Port     int    `json:"port"`
		Priority int    `json:"priority"`
		Weight   int    `json:"weight"`
		Mail     bool   `json:"mail"`
	}
	if err := json.Unmarshal(value, &r); err != nil {
		return sources.Endpoint{}, fmt.Errorf("not a SkyDNS record: %w", err)
	}
	if r.Mail || r.Host == "" {
		return sources.Endpoint{}, errNotInstance
	}
	if r.Port == 0 {
		return sources.Endpoint{}, fmt.Errorf("record for %q has no port", r.Host)
	}
	ep, err := ipPort(r.Host, strconv.Itoa(r.Port))
	if err != nil {
		return ep, err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"priority", r.Priority}, {"weight", r.Weight}} {
		if f.v < 0 || f.v > 65535 {
			return sources.Endpoint{}, fmt.Errorf("%s %d is outside 0..65535", f.name, f.v)
		}
	}
	ep.Priority = uint32(r.Priority)
	if r.Weight > 0 {
		ep.Weight = uint32(r.Weight)
	}
	return ep, nil
}
