package file

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// fileSDYAML is a file_sd file in the shape Prometheus documents: a list of
// groups, each with targets as host:port and optional labels.
const fileSDYAML = `
- targets: ['10.0.10.2:9100', '10.0.10.3:9100']
  labels:
    job: node
    __meta_datacenter: london
- targets: ['10.0.40.2:9100']
  labels:
    job: node
    __meta_datacenter: paris
- targets: ['10.0.20.7:5432']
  labels: {job: db}
`

// fileSDJSON is the same document in JSON, as file_sd and http_sd take it.
const fileSDJSON = `[
  {"targets": ["10.0.10.2:9100", "10.0.10.3:9100"], "labels": {"job": "node", "__meta_datacenter": "london"}},
  {"targets": ["10.0.40.2:9100"], "labels": {"job": "node", "__meta_datacenter": "paris"}},
  {"targets": ["10.0.20.7:5432"], "labels": {"job": "db"}}
]`

func healthy(addr string, port uint32, md map[string]string) sources.Endpoint {
	return sources.Endpoint{Address: addr, Port: port, Weight: 1, Health: sources.HealthHealthy, Metadata: md}
}

var fileSDWant = []sources.Service{
	{Name: "node", Endpoints: []sources.Endpoint{
		healthy("10.0.10.2", 9100, map[string]string{"__meta_datacenter": "london"}),
		healthy("10.0.10.3", 9100, map[string]string{"__meta_datacenter": "london"}),
		healthy("10.0.40.2", 9100, map[string]string{"__meta_datacenter": "paris"}),
	}},
	{Name: "db", Endpoints: []sources.Endpoint{healthy("10.0.20.7", 5432, nil)}},
}

func TestSchemaParse(t *testing.T) {
	byMeta := Schema{ServiceLabel: "__meta_service"}
	tests := []struct {
		name    string
		schema  Schema
		json    bool
		data    string
		want    []sources.Service
		dropped []string // the dropped targets' errors, in order
		wantErr string   // substring of the error; empty means success
	}{
		{name: "file_sd yaml", data: fileSDYAML, want: fileSDWant},
		{name: "file_sd json", json: true, data: fileSDJSON, want: fileSDWant},
		{name: "declared prometheus", schema: Schema{Format: FormatPrometheus}, json: true, data: fileSDJSON, want: fileSDWant},
		{name: "auto reads the xdsbridge format too", data: fullYAML, want: fullWant},
		{name: "no groups", data: "[]", want: []sources.Service{}},
		{name: "a service with no targets", data: "- {targets: [], labels: {job: idle}}\n- labels: {job: bare}\n",
			want: []sources.Service{{Name: "idle"}, {Name: "bare"}}},
		{name: "another service label", schema: byMeta,
			data: "- targets: ['[::1]:80']\n  labels: {__meta_service: web, job: ignored-here}\n",
			want: []sources.Service{{Name: "web", Endpoints: []sources.Endpoint{healthy("::1", 80, map[string]string{"job": "ignored-here"})}}}},
		{name: "default service", schema: Schema{DefaultService: "scraped"},
			data: "- targets: ['10.0.0.1:80']\n- targets: ['10.0.0.2:80']\n  labels: {job: web}\n",
			want: []sources.Service{
				{Name: "scraped", Endpoints: []sources.Endpoint{healthy("10.0.0.1", 80, nil)}},
				{Name: "web", Endpoints: []sources.Endpoint{healthy("10.0.0.2", 80, nil)}},
			}},
		{name: "label values as written", data: "- targets: ['10.0.0.1:80']\n  labels: {job: web, shard: 3, canary: true}\n",
			want: []sources.Service{{Name: "web", Endpoints: []sources.Endpoint{healthy("10.0.0.1", 80, map[string]string{"shard": "3", "canary": "true"})}}}},

		{name: "bad targets are dropped, the rest served",
			data: `- targets:
  - 10.0.0.1:80
  - db.example.org:5432
  - 10.0.0.2
  - 0.0.0.0:80
  - 10.0.0.3:0
  - '[fe80::1%eth0]:80'
  - 10.0.0.1:80
  labels: {job: web}
- targets: ['10.0.0.9:80']
`,
			want: []sources.Service{{Name: "web", Endpoints: []sources.Endpoint{healthy("10.0.0.1", 80, nil)}}},
			dropped: []string{
				`[0].targets[1]: "db.example.org:5432" is not IP:port (line 3)`,
				`[0].targets[2]: "10.0.0.2" is not IP:port (line 4)`,
				`[0].targets[3]: address "0.0.0.0" cannot be an upstream: 0.0.0.0 is the unspecified address (line 5)`,
				`[0].targets[4]: port 0 is outside 1..65535 (line 6)`,
				`[0].targets[5]: address "fe80::1%eth0" cannot be an upstream: fe80::1%eth0 is scoped to an interface of the registry's host (line 7)`,
				`[0].targets[6]: 10.0.0.1:80 repeats [0].targets[0] of service "web" (line 8)`,
				`[1].targets[0]: its group has no "job" label and default_service is not set (line 10)`,
			}},
		{name: "an empty service label is no label", json: true, data: `[{"targets": ["10.0.0.1:80"], "labels": {"job": ""}}]`,
			want:    []sources.Service{},
			dropped: []string{`[0].targets[0]: its group has no "job" label and default_service is not set`}},

		{name: "auto and a scalar", data: "hello\n",
			wantErr: "want a mapping with `services` (the xdsbridge format) or a list of Prometheus target groups (format: auto), got \"hello\" (line 1)"},
		{name: "declared prometheus and a mapping", schema: Schema{Format: FormatPrometheus}, data: fullYAML,
			wantErr: "want a list of target groups (format: prometheus), got a mapping"},
		{name: "declared xdsbridge and a list", schema: Schema{Format: FormatXDSBridge}, data: fileSDYAML,
			wantErr: "want a mapping with `services` (format: xdsbridge), got a list"},
		{name: "group not a mapping", json: true, data: `[null]`, wantErr: `[0]: want a mapping, got "null"`},
		{name: "unknown group field", data: "- targets: []\n  lables: {job: web}\n", wantErr: "[0].lables: unknown field (line 2)"},
		{name: "targets not a list", data: "- targets: 10.0.0.1:80\n", wantErr: `[0].targets: want a list, got "10.0.0.1:80"`},
		{name: "target not a string", data: "- targets: [{host: 10.0.0.1}]\n", wantErr: "[0].targets[0]: want a string, got a mapping"},
		{name: "labels not a mapping", data: "- labels: [job]\n", wantErr: "[0].labels: want a mapping, got a list"},
		{name: "label value not a string", json: true, data: `[{"targets": [], "labels": {"job": "web", "env": {"a": "b"}}}]`,
			wantErr: "[0].labels.env: want a string, got a mapping"},
		{name: "duplicate label", data: "- labels: {job: a, job: b}\n", wantErr: "[0].labels.job: duplicate label"},
		{name: "empty label name", data: "- labels: {'': a}\n", wantErr: "[0].labels: a label name is empty"},
		{name: "empty document", data: " \n", wantErr: "document is empty (write `services: []` or `[]` for no services)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := tt.schema.Parse([]byte(tt.data), tt.json)
			if tt.wantErr != "" {
				var ke *settings.KeyError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ke) {
					t.Fatalf("Parse() error = %v, want a *settings.KeyError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if !slices.EqualFunc(doc.Services, tt.want, sources.Service.Equal) {
				t.Errorf("Parse() = %+v\nwant %+v", doc.Services, tt.want)
			}
			var dropped []string
			for _, err := range doc.Dropped {
				dropped = append(dropped, err.Error())
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("dropped:\n%s\nwant:\n%s", strings.Join(dropped, "\n"), strings.Join(tt.dropped, "\n"))
			}
		})
	}
}

// TestSchemaOrigins checks that each endpoint of a target group names its
// target as its registry record.
func TestSchemaOrigins(t *testing.T) {
	doc, err := Schema{}.Parse([]byte(fileSDYAML), false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range doc.Services {
		for _, e := range s.Endpoints {
			got = append(got, s.Name+" "+e.Origin.Record)
		}
	}
	want := []string{"node [0].targets[0]", "node [0].targets[1]", "node [1].targets[0]", "db [2].targets[0]"}
	if !slices.Equal(got, want) {
		t.Errorf("records = %q, want %q", got, want)
	}
}

func TestSchemaValidate(t *testing.T) {
	tests := []struct {
		schema  Schema
		wantErr string
	}{
		{Schema{}, ""},
		{Schema{Format: FormatPrometheus, ServiceLabel: "__meta_service", DefaultService: "x"}, ""},
		{Schema{Format: "prom"}, `format: "prom" is not one of auto, xdsbridge, prometheus`},
		{Schema{Format: FormatXDSBridge, ServiceLabel: "job"}, "service_label: applies to Prometheus target groups only"},
		{Schema{Format: FormatXDSBridge, DefaultService: "x"}, "default_service: applies to Prometheus target groups only"},
		{Schema{ServiceLabel: " job"}, `service_label: " job" has leading or trailing spaces`},
	}
	for _, tt := range tests {
		err := tt.schema.Validate()
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)) {
			t.Errorf("%+v: Validate() = %v, want %q", tt.schema, err, tt.wantErr)
		}
	}
}

// TestRunFileSD serves a file_sd file, targets.json, with the service
// named by another label: each service is one cluster, bad targets are
// dropped and counted (each once per change of the file, however often it
// is read), and the status note says why until a clean file clears it.
func TestRunFileSD(t *testing.T) {
	doc := `[
  {"targets": ["10.0.10.2:9100", "db.example.org:5432"], "labels": {"__meta_service": "node", "rack": "r1"}},
  {"targets": ["10.0.20.7:5432"], "labels": {"__meta_service": "db"}},
  {"targets": ["10.0.30.1:80"]}
]`
	h := startFile(t, Config{Path: "targets.json", Schema: Schema{ServiceLabel: "__meta_service"}}, doc, nil)
	u := h.next("node", "db")
	if e := u.Services[0].Endpoints; len(e) != 1 || e[0].Address != "10.0.10.2" || e[0].Port != 9100 || e[0].Metadata["rack"] != "r1" {
		t.Errorf("node's endpoints = %+v", e)
	}
	s := h.status.Snapshot()
	if s.Dropped != 2 || !strings.Contains(s.Notes[noteDropped], `[0].targets[1]: "db.example.org:5432" is not IP:port`) ||
		!strings.Contains(s.Notes[noteDropped], `[2].targets[0]: its group has no "__meta_service" label`) {
		t.Errorf("dropped %d, note %q; want 2 and a note naming both targets", s.Dropped, s.Notes[noteDropped])
	}
	before := s.LastSuccess
	h.replace(doc)
	h.waitStatus("read again", func(s sources.StatusSnapshot) bool { return s.LastSuccess.After(before) })
	if s := h.status.Snapshot(); s.Dropped != 2 {
		t.Errorf("dropped %d after the same file was written again, want still 2", s.Dropped)
	}
	h.replace(strings.Replace(doc, "10.0.20.7", "10.0.20.8", 1))
	h.next("node", "db")
	if s := h.status.Snapshot(); s.Dropped != 4 {
		t.Errorf("dropped %d after a change of the file, want 4", s.Dropped)
	}
	h.replace(`[{"targets": ["10.0.10.2:9100"], "labels": {"__meta_service": "node"}}]`)
	h.next("node")
	if s := h.status.Snapshot(); s.Dropped != 4 || s.Notes[noteDropped] != "" {
		t.Errorf("after a clean file: dropped %d, note %q; want 4 and no note", s.Dropped, s.Notes[noteDropped])
	}
}

// TestRunHostName: in the xdsbridge format, an endpoint whose address is a
// host name is dropped and counted, named in the status note, and the rest
// of the file is served, also when the file is then edited (the item cache
// must not hide the drop).
func TestRunHostName(t *testing.T) {
	doc := "services:\n- name: web\n  endpoints:\n  - {address: web-1.internal, port: 80}\n  - {address: 10.0.0.1, port: 80}\n- name: api\n  endpoints: [{address: 10.0.0.2, port: 81}]\n"
	h := startFile(t, Config{Path: "services.yaml"}, doc, nil)
	u := h.next("api", "web")
	for _, svc := range u.Services {
		if svc.Name == "web" && (len(svc.Endpoints) != 1 || svc.Endpoints[0].Address != "10.0.0.1") {
			t.Errorf("web's endpoints = %+v, want 10.0.0.1 alone", svc.Endpoints)
		}
	}
	s := h.status.Snapshot()
	if s.Dropped != 1 || !strings.Contains(s.Notes[noteDropped], `services[0].endpoints[0].address: "web-1.internal" is not an IP address`) {
		t.Errorf("dropped %d, note %q; want 1 and a note naming the endpoint", s.Dropped, s.Notes[noteDropped])
	}
	h.replace(strings.Replace(doc, "10.0.0.2", "10.0.0.3", 1))
	h.next("api", "web")
	if s := h.status.Snapshot(); s.Dropped != 2 || s.Notes[noteDropped] == "" {
		t.Errorf("after an edit: dropped %d, note %q; want 2 and the note", s.Dropped, s.Notes[noteDropped])
	}
}

// TestRunFormatDeclared checks that a declared format rejects a file of
// the other one, keeping the last good services, with an error that says
// which format the configuration expects.
func TestRunFormatDeclared(t *testing.T) {
	h := startFile(t, Config{Path: "targets.yml", Schema: Schema{Format: FormatPrometheus}}, fileSDYAML, nil)
	h.next("node", "db")
	h.replace(services("web"))
	s := h.waitStatus("failed", func(s sources.StatusSnapshot) bool { return s.Stale })
	const want = "targets.yml: want a list of target groups (format: prometheus), got a mapping (line 1)"
	if s.LastError != want {
		t.Errorf("last error %q, want %q", s.LastError, want)
	}
}
