package zookeeper

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/xdsbridge/xdsbridge/sources"
)

// dubboProviders is where Apache Dubbo's ZooKeeper registry keeps the
// providers of an interface: /<root>/<interface>/providers, one child per
// provider whose name is the provider's URL, URL-encoded
// (https://dubbo.apache.org/en/overview/reference/setting/registry/zookeeper/).
func dubboProviders(svc string) string { return svc + "/providers" }

// dubboMeta are the URL parameters kept as metadata: the ones consumers
// route by (group, version), the side, and the provider's application
// and protocol.
var dubboMeta = []string{"group", "version", "side", "application", "weight"}

// parseDubbo reads one provider URL from its znode name. Its weight
// parameter (Dubbo's default 100 when absent) is the endpoint's weight;
// a provider disabled by an override (enabled=false) is served draining.
func parseDubbo(_ *Service, name string, _ []byte) (sources.Endpoint, error) {
	raw, err := url.QueryUnescape(name)
	if err != nil {
		return sources.Endpoint{}, fmt.Errorf("not URL-encoded: %w", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return sources.Endpoint{}, fmt.Errorf("not a provider URL: %w", err)
	}
	if u.Scheme == "" || u.Host == "" {
		return sources.Endpoint{}, fmt.Errorf("not a provider URL (protocol://ip:port/interface?...)")
	}
	host, ps, err := net.SplitHostPort(u.Host)
	if err != nil {
		return sources.Endpoint{}, fmt.Errorf("address %q: %w", u.Host, err)
	}
	pn, err := strconv.ParseInt(ps, 10, 64)
	if err != nil {
		return sources.Endpoint{}, fmt.Errorf("port %q is not a number", ps)
	}
	p, err := port(pn)
	if err != nil {
		return sources.Endpoint{}, err
	}
	q := u.Query()
	e := sources.Endpoint{Address: host, Port: p, Weight: 100, Health: sources.HealthHealthy,
		Metadata: map[string]string{"protocol": u.Scheme}}
	for _, k := range dubboMeta {
		if v := q.Get(k); v != "" {
			e.Metadata[k] = v
		}
	}
	if w := q.Get("weight"); w != "" {
		n, err := strconv.ParseUint(w, 10, 32)
		if err != nil || n > 1<<24 {
			return sources.Endpoint{}, fmt.Errorf("weight %q is not a number in 0..%d", w, 1<<24)
		}
		e.Weight = uint32(n)
	}
	if q.Get("enabled") == "false" {
		e.Health = sources.HealthDraining
	}
	return e, nil
}
