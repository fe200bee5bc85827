package http

import (
	"fmt"
	nethttp "net/http"
	"strings"
	"testing"
)

// httpSDDoc is an http_sd answer in the shape Prometheus documents: a JSON
// list of target groups, targets as host:port, labels optional.
const httpSDDoc = `[
  {"targets": ["10.0.10.2:9100", "10.0.10.3:9100"], "labels": {"__meta_datacenter": "london", "job": "node"}},
  {"targets": ["10.0.40.2:9100", "node-5.example.org:9100"], "labels": {"__meta_datacenter": "paris", "job": "node"}},
  {"targets": ["10.0.20.7:5432"], "labels": {"job": "db"}}
]`

// TestHTTPSD polls an http_sd endpoint: each job is a cluster, the other
// labels are endpoint metadata, the host-name target is dropped and
// counted, and the request carries the header Prometheus sends.
func TestHTTPSD(t *testing.T) {
	reg, srv := newRegistry(t, false, httpSDDoc)
	up, st := run(t, map[string]any{"url": srv.URL, "interval": "15s"})
	u := nextUpdate(t, up)
	if got := addresses(u); got != "full=true [node=10.0.10.2 node=10.0.10.3 node=10.0.40.2 db=10.0.20.7]" {
		t.Fatalf("update %s", got)
	}
	if md := u.Services[0].Endpoints[2].Metadata; md["__meta_datacenter"] != "paris" || len(md) != 1 {
		t.Errorf("metadata of 10.0.40.2 = %v, want only __meta_datacenter=paris", md)
	}
	s := st.Snapshot()
	if s.Dropped != 1 || !strings.Contains(s.Notes["dropped_targets"], `[1].targets[1]: "node-5.example.org:9100" is not IP:port`) {
		t.Errorf("dropped %d, note %q; want 1 and a note naming the target", s.Dropped, s.Notes["dropped_targets"])
	}
	if got := reg.last().Header.Get("X-Prometheus-Refresh-Interval-Seconds"); got != "15" {
		t.Errorf("X-Prometheus-Refresh-Interval-Seconds = %q, want 15", got)
	}
}

// TestBodyFormat serves documents under various Content-Types: a header
// naming JSON or YAML decides, anything else leaves it to the body's first
// byte, and a failure says which was chosen and why.
func TestBodyFormat(t *testing.T) {
	const (
		yamlDoc = "services:\n- name: web\n  endpoints: [{address: 10.0.0.1, port: 8080}]\n"
		sdYAML  = "- targets: ['10.0.0.1:8080']\n  labels: {job: web}\n"
	)
	tests := []struct {
		name        string
		contentType string // "-" sends none
		body        string
		want        string // the update, or the error's substring
	}{
		{"json", "application/json; charset=utf-8", webDoc, "full=true [web=10.0.0.1]"},
		{"yaml", "application/yaml", yamlDoc, "full=true [web=10.0.0.1]"},
		{"x-yaml", "text/x-yaml", sdYAML, "full=true [web=10.0.0.1]"},
		{"yaml as octet-stream", "application/octet-stream", yamlDoc, "full=true [web=10.0.0.1]"},
		{"target groups as octet-stream", "application/octet-stream", sdYAML, "full=true [web=10.0.0.1]"},
		{"json without a Content-Type", "-", httpSDDoc, "full=true [node=10.0.10.2 node=10.0.10.3 node=10.0.40.2 db=10.0.20.7]"},
		{"yaml labelled json", "application/json", yamlDoc,
			"parsing the body as JSON (Content-Type application/json): parsing JSON: invalid character 's' looking for beginning of value (line 1)"},
		{"bad yaml as octet-stream", "application/octet-stream", "services: [\n",
			`parsing the body as YAML (Content-Type "application/octet-stream" is neither JSON nor YAML; sniffed YAML): parsing YAML`},
		{"bad json without a Content-Type", "-", `[{"targets": }]`,
			"parsing the body as JSON (no Content-Type; sniffed JSON): parsing JSON: invalid character '}'"},
		{"json labelled yaml", "application/yaml", `{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 0}]}]}`,
			"parsing the body as YAML (Content-Type application/yaml): services[0].endpoints[0].port: 0 is outside 1..65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, srv := newRegistry(t, false, "")
			reg.set(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
				if tt.contentType == "-" {
					w.Header()["Content-Type"] = nil // no sniffing by the server either
				} else {
					w.Header().Set("Content-Type", tt.contentType)
				}
				fmt.Fprint(w, tt.body)
			})
			up, st := run(t, map[string]any{"url": srv.URL})
			if strings.HasPrefix(tt.want, "full=") {
				if got := addresses(nextUpdate(t, up)); got != tt.want {
					t.Errorf("update %s, want %s", got, tt.want)
				}
				return
			}
			s := waitStale(t, st, true)
			if !strings.Contains(s.LastError, tt.want) {
				t.Errorf("last error %q, want it to contain %q", s.LastError, tt.want)
			}
			noUpdate(t, up)
		})
	}
}

// TestHTTPSDDeclared checks that `format: prometheus` rejects a document
// in the xdsbridge format with an error naming the format expected.
func TestHTTPSDDeclared(t *testing.T) {
	_, srv := newRegistry(t, false, webDoc)
	up, st := run(t, map[string]any{"url": srv.URL, "format": "prometheus"})
	s := waitStale(t, st, true)
	if want := "want a list of target groups (format: prometheus), got a mapping"; !strings.Contains(s.LastError, want) {
		t.Errorf("last error %q, want it to contain %q", s.LastError, want)
	}
	noUpdate(t, up)
	if s.Synced {
		t.Errorf("status %+v: synced without a good answer", s)
	}
}
