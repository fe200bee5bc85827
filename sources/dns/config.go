package dns

import (
	"fmt"
	"strings"
	"text/template"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/settings"
)

// Config is the configuration of one `type: dns` source; its keys and
// their defaults (defaults()) are in docs/configuration.md. Services name
// what to look up, each an SRV name or a host name with a port; Templates
// expand into more Services. Without Servers the nameservers and search
// list of ResolvConf apply.
//
// After a failed lookup, the name is retried after Refresh.Min, doubling
// up to Refresh.Max, each wait drawn from its second half
// (sources.Backoff), so that a failing resolver is asked less and less
// often but never given up on.
type Config struct {
	Servers    []string      `mapstructure:"servers"`
	ResolvConf string        `mapstructure:"resolv_conf"`
	Timeout    time.Duration `mapstructure:"timeout"`
	Attempts   int           `mapstructure:"attempts"`
	Transport  string        `mapstructure:"transport"`
	EDNSBuffer int           `mapstructure:"edns_buffer_size"`
	Family     string        `mapstructure:"family"`
	Refresh    Refresh       `mapstructure:"refresh"`
	Services   []Service     `mapstructure:"services"`
	Templates  []Template    `mapstructure:"templates"`
}

// Refresh bounds when a name is queried again.
type Refresh struct {
	Min      time.Duration `mapstructure:"min"`
	Max      time.Duration `mapstructure:"max"`
	Jitter   float64       `mapstructure:"jitter"`
	Interval time.Duration `mapstructure:"interval"`
}

// Service is one name to look up, feeding the cluster of that name:
// either an SRV name, or a host name and a port.
type Service struct {
	Cluster string `mapstructure:"cluster"`
	SRV     string `mapstructure:"srv"`
	Host    string `mapstructure:"host"`
	Port    int    `mapstructure:"port"`
}

// templateData is what a Template's strings see.
type templateData struct{ Service, Domain string }

// Template expands into one Service per entry of Services; its SRV, Host
// and Cluster are text/template strings over {{.Service}} and {{.Domain}}.
type Template struct {
	Service  `mapstructure:",squash"`
	Services []string `mapstructure:"services"`
	Domain   string   `mapstructure:"domain"`
}

// defaults returns the configuration that keys left out keep.
func defaults() Config {
	return Config{
		ResolvConf: "/etc/resolv.conf",
		Timeout:    2 * time.Second,
		Attempts:   2,
		Transport:  TransportAuto,
		EDNSBuffer: 1232,
		Family:     "any",
		Refresh:    Refresh{Min: 5 * time.Second, Max: 5 * time.Minute, Jitter: 0.1},
	}
}

// validate checks the configuration and returns the expanded entries and
// the normalized servers. Errors are *settings.KeyError values.
func (c *Config) validate() ([]entry, []string, Family, error) {
	var servers []string
	for i, s := range c.Servers {
		hp, err := hostPort(s)
		if err != nil {
			return nil, nil, 0, settings.Errorf(fmt.Sprintf("servers[%d]", i), "%v", err)
		}
		servers = append(servers, hp)
	}
	if c.Timeout <= 0 {
		return nil, nil, 0, settings.Errorf("timeout", "must be positive")
	}
	if err := c.checkTransport(); err != nil {
		return nil, nil, 0, err
	}
	var fam Family
	switch strings.ToLower(c.Family) {
	case "any", "":
		fam = FamilyAny
	case "ipv4":
		fam = FamilyIPv4
	case "ipv6":
		fam = FamilyIPv6
	default:
		return nil, nil, 0, settings.Errorf("family", "%q is not one of any, ipv4, ipv6", c.Family)
	}
	r := c.Refresh
	switch {
	case r.Min <= 0:
		return nil, nil, 0, settings.Errorf("refresh.min", "must be positive")
	case r.Max < r.Min:
		return nil, nil, 0, settings.Errorf("refresh.max", "must not be below refresh.min (%s)", r.Min)
	case r.Jitter < 0 || r.Jitter >= 1:
		return nil, nil, 0, settings.Errorf("refresh.jitter", "must be in [0, 1)")
	case r.Interval < 0:
		return nil, nil, 0, settings.Errorf("refresh.interval", "must not be negative")
	}

	var entries []entry
	clusters := map[string]string{}
	add := func(key string, s Service) error {
		e, err := s.entry()
		if err != nil {
			return settings.Prefix(key, err)
		}
		if prev, dup := clusters[e.cluster]; dup {
			return settings.Errorf(key+".cluster", "%q is already fed by %s", e.cluster, prev)
		}
		clusters[e.cluster] = key
		entries = append(entries, e)
		return nil
	}
	for i, s := range c.Services {
		if err := add(fmt.Sprintf("services[%d]", i), s); err != nil {
			return nil, nil, 0, err
		}
	}
	for i, t := range c.Templates {
		key := fmt.Sprintf("templates[%d]", i)
		expanded, err := t.expand()
		if err != nil {
			return nil, nil, 0, settings.Prefix(key, err)
		}
		for j, s := range expanded {
			if err := add(fmt.Sprintf("%s.services[%d]", key, j), s); err != nil {
				return nil, nil, 0, err
			}
		}
	}
	if len(entries) == 0 {
		return nil, nil, 0, settings.Errorf("services", "at least one service (or template) is needed")
	}
	return entries, servers, fam, nil
}

func (s Service) entry() (entry, error) {
	if s.Cluster == "" {
		return entry{}, settings.Errorf("cluster", "is required")
	}
	switch {
	case s.SRV != "" && s.Host != "":
		return entry{}, settings.Errorf("host", "set either srv or host, not both")
	case s.SRV != "":
		if _, ok := mdns.IsDomainName(s.SRV); !ok {
			return entry{}, settings.Errorf("srv", "%q is not a domain name", s.SRV)
		}
		if s.Port != 0 {
			return entry{}, settings.Errorf("port", "applies to host entries only; SRV records carry the port")
		}
		return entry{cluster: s.Cluster, kind: KindSRV, name: s.SRV}, nil
	case s.Host != "":
		if _, ok := mdns.IsDomainName(s.Host); !ok {
			return entry{}, settings.Errorf("host", "%q is not a domain name", s.Host)
		}
		if s.Port < 1 || s.Port > 65535 {
			return entry{}, settings.Errorf("port", "must be in 1..65535 for a host entry")
		}
		return entry{cluster: s.Cluster, kind: KindHost, name: s.Host, port: uint32(s.Port)}, nil
	}
	return entry{}, settings.Errorf("srv", "set srv or host")
}

func (t Template) expand() ([]Service, error) {
	if len(t.Services) == 0 {
		return nil, settings.Errorf("services", "a template needs at least one service")
	}
	fields := []struct {
		key string
		src string
		dst func(*Service) *string
	}{
		{"cluster", t.Cluster, func(s *Service) *string { return &s.Cluster }},
		{"srv", t.SRV, func(s *Service) *string { return &s.SRV }},
		{"host", t.Host, func(s *Service) *string { return &s.Host }},
	}
	out := make([]Service, len(t.Services))
	for _, f := range fields {
		if f.src == "" {
			continue
		}
		tpl, err := template.New(f.key).Option("missingkey=error").Parse(f.src)
		if err != nil {
			return nil, settings.Errorf(f.key, "%v", scalar.TemplateError(err, templateData{}))
		}
		for i, name := range t.Services {
			var b strings.Builder
			data := templateData{name, t.Domain}
			if err := tpl.Execute(&b, data); err != nil {
				return nil, settings.Errorf(f.key, "expanding it for %q: %v", name, scalar.TemplateError(err, data))
			}
			*f.dst(&out[i]) = b.String()
		}
	}
	for i := range out {
		out[i].Port = t.Port
	}
	return out, nil
}
