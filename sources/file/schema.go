package file

import (
	"fmt"
	"log/slog"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// The formats of a services document (Schema.Format).
const (
	// FormatAuto reads either format, told apart by the document's
	// top-level value: a mapping is the xdsbridge format, a list is
	// Prometheus target groups.
	FormatAuto = "auto"
	// FormatXDSBridge is the `services:` document (see Parse).
	FormatXDSBridge = "xdsbridge"
	// FormatPrometheus is a list of Prometheus target groups, the
	// document of file_sd and http_sd (see Schema.Parse).
	FormatPrometheus = "prometheus"
)

// DefaultServiceLabel is the target-group label that names the service
// by default. In Prometheus a job is the set of instances with the same
// purpose, which is what a service is here, and a target group's `job`
// label is the one Prometheus itself gives that meaning (it overrides the
// scrape configuration's job_name).
const DefaultServiceLabel = "job"

// Schema says how a services document is read: its format and, for
// Prometheus target groups, which label names the service. The zero value
// reads either format, naming services by DefaultServiceLabel. It is part
// of the file and http sources' configuration.
type Schema struct {
	// Format is FormatAuto (default), FormatXDSBridge or
	// FormatPrometheus. Declaring it makes a document of the other shape
	// an error that says which format the configuration expects.
	Format string `mapstructure:"format"`
	// ServiceLabel is the label of a target group whose value is the
	// service's name. Default DefaultServiceLabel.
	ServiceLabel string `mapstructure:"service_label"`
	// DefaultService names the service of the target groups that lack
	// ServiceLabel, as a scrape configuration's job_name does in
	// Prometheus. Empty (the default): their targets are dropped and
	// counted.
	DefaultService string `mapstructure:"default_service"`
}

// Validate reports the first invalid key.
func (sc Schema) Validate() error {
	switch sc.Format {
	case "", FormatAuto, FormatXDSBridge, FormatPrometheus:
	default:
		return settings.Errorf("format", "%q is not one of %s, %s, %s", sc.Format, FormatAuto, FormatXDSBridge, FormatPrometheus)
	}
	if sc.Format == FormatXDSBridge {
		switch {
		case sc.ServiceLabel != "":
			return settings.Errorf("service_label", "applies to Prometheus target groups only (format is %s)", sc.Format)
		case sc.DefaultService != "":
			return settings.Errorf("default_service", "applies to Prometheus target groups only (format is %s)", sc.Format)
		}
	}
	if sc.ServiceLabel != "" && strings.TrimSpace(sc.ServiceLabel) != sc.ServiceLabel {
		return settings.Errorf("service_label", "%q has leading or trailing spaces", sc.ServiceLabel)
	}
	return nil
}

func (sc Schema) format() string {
	if sc.Format == "" {
		return FormatAuto
	}
	return sc.Format
}

func (sc Schema) label() string {
	if sc.ServiceLabel == "" {
		return DefaultServiceLabel
	}
	return sc.ServiceLabel
}

// Document is a services document as read.
type Document struct {
	// Format is the format read: FormatXDSBridge or FormatPrometheus.
	Format string
	// Services in the order of their first appearance, each with its
	// endpoints in canonical order.
	Services []sources.Service
	// Dropped are the targets of a Prometheus document, or the endpoints
	// of a document in the xdsbridge format, left out (see Schema.Parse
	// and Parse).
	Dropped Dropped
}

// Parse reads a services document (JSON when isJSON, else YAML) in the
// schema's format: the xdsbridge format as Parse does, or Prometheus
// target groups (see targetGroups). A document that is not valid in that
// format is rejected whole with a *settings.KeyError naming the field; in
// FormatAuto, one whose top-level value is neither a mapping nor a list
// says what each format expects.
func (sc Schema) Parse(data []byte, isJSON bool) (Document, error) {
	root, err := parseTree(data, isJSON)
	if err != nil {
		return Document{}, err
	}
	n := deref(root)
	switch f := sc.format(); {
	case f == FormatPrometheus || f == FormatAuto && n.Kind == yaml.SequenceNode:
		if n.Kind != yaml.SequenceNode {
			return Document{}, fail("", n, "want a list of target groups (format: %s), got %s", f, describe(n))
		}
		return sc.targetGroups(n)
	case f == FormatXDSBridge || n.Kind == yaml.MappingNode:
		if n.Kind != yaml.MappingNode {
			return Document{}, fail("", n, "want a mapping with `services` (format: %s), got %s", f, describe(n))
		}
		svcs, dropped, err := parseDocument(n)
		return Document{Format: FormatXDSBridge, Services: svcs, Dropped: dropped}, err
	default:
		return Document{}, fail("", n, "want a mapping with `services` (the xdsbridge format) or a list of "+
			"Prometheus target groups (format: %s), got %s", f, describe(n))
	}
}

// Dropped are the targets a document left out, each a *settings.KeyError
// naming the target and why, such as `[1].targets[0]: "db:5432" is not
// IP:port (line 7)`.
type Dropped []error

// noteDropped is the key of the status note that says why targets were
// dropped.
const noteDropped = "dropped_targets"

// Record counts the dropped targets of a new document of the source
// whose status is st (as invalid endpoints are counted: dropped_endpoints),
// logs them once, and sets the status note that says why, naming the
// first few; an empty d clears the note. Called once per new version of
// the document, it counts each dropped target once per change of the
// document, not once per read.
func (d Dropped) Record(st *sources.Status, log *slog.Logger, doc string) {
	if len(d) == 0 {
		st.Note(noteDropped, "")
		return
	}
	st.Dropped(len(d))
	const shown = 3
	why := make([]string, 0, shown)
	for _, err := range d[:min(len(d), shown)] {
		why = append(why, err.Error())
	}
	more := ""
	if len(d) > shown {
		more = fmt.Sprintf("; and %d more", len(d)-shown)
	}
	msg := fmt.Sprintf("%s: %d targets not served: %s%s", doc, len(d), strings.Join(why, "; "), more)
	log.Warn("dropped targets that cannot be served", "doc", doc, "dropped", len(d), "first", d[0].Error())
	st.Note(noteDropped, msg)
}
