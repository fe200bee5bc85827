package builtin

import (
	"strings"
	"text/template"

	"github.com/xdsbridge/xdsbridge/internal/scalar"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// fields is what name and locality templates see.
type fields struct {
	Name, Source string
	Meta         map[string]string
	Locality     sources.Locality
}

// sample exercises a template at load time, so that a reference to an
// unknown field is a configuration error rather than a silent blank.
var sample = fields{Name: "web", Source: "static", Meta: map[string]string{}}

// parseTemplate parses text (empty: nil, no template) and checks it
// against sample; errors name key.
func parseTemplate(key, text string) (*template.Template, error) {
	if text == "" {
		return nil, nil
	}
	t, err := template.New(key).Option("missingkey=zero").Parse(text)
	if err == nil {
		_, err = render(t, sample)
	}
	if err != nil {
		return nil, settings.Errorf(key, "%v", scalar.TemplateError(err, sample))
	}
	return t, nil
}

// render executes t on f.
func render(t *template.Template, f fields) (string, error) {
	var b strings.Builder
	err := t.Execute(&b, f)
	return b.String(), err
}

// endpointFields are the template fields of endpoint e of svc.
func endpointFields(svc sources.Service, e sources.Endpoint) fields {
	return fields{Name: svc.Name, Source: svc.Source, Meta: e.Metadata, Locality: e.Locality}
}
