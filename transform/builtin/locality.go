package builtin

import (
	"text/template"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
)

// locality sets the region, zone and sub-zone of matching endpoints from
// templates (fixed text, or such as {{.Meta.az}}). A field whose template
// is unset, fails or renders nothing stays as it was.
type locality struct {
	name                  string
	sel                   sources.Selector
	region, zone, subZone *template.Template
}

// of returns the locality the templates give endpoint e of svc.
func (l locality) of(svc sources.Service, e sources.Endpoint) sources.Locality {
	f := endpointFields(svc, e)
	loc := e.Locality
	for _, p := range []struct {
		t   *template.Template
		dst *string
	}{{l.region, &loc.Region}, {l.zone, &loc.Zone}, {l.subZone, &loc.SubZone}} {
		if p.t == nil {
			continue
		}
		if v, err := render(p.t, f); err == nil && v != "" {
			*p.dst = v
		}
	}
	return loc
}

func (l locality) Service(svc sources.Service) (sources.Service, bool) {
	if !l.sel.MatchName(svc) {
		return svc, true
	}
	match := func(e sources.Endpoint) bool { return l.sel.MatchEndpoint(e) && l.of(svc, e) != e.Locality }
	return transform.Each(svc, l.name, match, func(e *sources.Endpoint) { e.Locality = l.of(svc, *e) }), true
}

func init() {
	register("locality", func(cfg map[string]any, opts transform.Options) (transform.Transform, error) {
		var c struct {
			selected `mapstructure:",squash"`
			Region   string `mapstructure:"region"`
			Zone     string `mapstructure:"zone"`
			SubZone  string `mapstructure:"sub_zone"`
		}
		if err := decode(cfg, &c, &c.Selector); err != nil {
			return nil, err
		}
		if c.Region == "" && c.Zone == "" && c.SubZone == "" {
			return nil, settings.Errorf("region", "set region, zone, sub_zone or several")
		}
		l := locality{name: opts.Name, sel: c.Selector}
		var err error
		for _, p := range []struct {
			key, text string
			dst       **template.Template
		}{{"region", c.Region, &l.region}, {"zone", c.Zone, &l.zone}, {"sub_zone", c.SubZone, &l.subZone}} {
			if *p.dst, err = parseTemplate(p.key, p.text); err != nil {
				return nil, err
			}
		}
		return l, nil
	})
}
