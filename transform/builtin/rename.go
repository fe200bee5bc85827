package builtin

import (
	"text/template"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
)

// rename gives matching services the cluster name its template renders
// (the Consul source's cluster_name, for every source). A template that
// fails or renders nothing leaves the name as it was.
type rename struct {
	name string
	sel  sources.Selector
	tmpl *template.Template
}

func (r rename) Service(svc sources.Service) (sources.Service, bool) {
	if !r.sel.MatchService(svc) {
		return svc, true
	}
	to, err := render(r.tmpl, fields{Name: svc.Name, Source: svc.Source})
	if err != nil || to == "" || to == svc.Name {
		return svc, true
	}
	out := transform.Each(svc, r.name, func(sources.Endpoint) bool { return true }, func(*sources.Endpoint) {})
	out.Name = to
	return out, true
}

func init() {
	register("rename", func(cfg map[string]any, opts transform.Options) (transform.Transform, error) {
		var c struct {
			selected `mapstructure:",squash"`
			Template string `mapstructure:"template"`
		}
		if err := decode(cfg, &c, &c.Selector); err != nil {
			return nil, err
		}
		if c.Template == "" {
			return nil, settings.Errorf("template", "is required")
		}
		t, err := parseTemplate("template", c.Template)
		if err != nil {
			return nil, err
		}
		return rename{name: opts.Name, sel: c.Selector, tmpl: t}, nil
	})
}
