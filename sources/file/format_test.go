package file

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

const fullYAML = `
services:
  - name: web
    endpoints:
      - address: 10.0.0.2
        port: 8080
        weight: 10
        priority: 1
        health: draining
        locality: {region: eu, zone: eu-1a, sub_zone: rack1}
        metadata: {version: v1, canary: 1}
      - address: 10.0.0.1
        port: 8080
  - name: idle
    endpoints: []
  - name: bare
`

const fullJSON = `{"services": [
	{"name": "web", "endpoints": [
		{"address": "10.0.0.2", "port": 8080, "weight": 10, "priority": 1, "health": "draining",
		 "locality": {"region": "eu", "zone": "eu-1a", "sub_zone": "rack1"},
		 "metadata": {"version": "v1", "canary": "1"}},
		{"address": "10.0.0.1", "port": 8080}
	]},
	{"name": "idle", "endpoints": []},
	{"name": "bare"}
]}`

var fullWant = []sources.Service{
	{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 8080, Weight: 1, Health: sources.HealthHealthy},
		{Address: "10.0.0.2", Port: 8080, Weight: 10, Priority: 1, Health: sources.HealthDraining,
			Locality: sources.Locality{Region: "eu", Zone: "eu-1a", SubZone: "rack1"},
			Metadata: map[string]string{"version": "v1", "canary": "1"}},
	}},
	{Name: "idle"},
	{Name: "bare"},
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		json    bool
		data    string
		want    []sources.Service
		wantErr string // substring of the error; empty means success
	}{
		{name: "yaml with every field", data: fullYAML, want: fullWant},
		{name: "json with every field", json: true, data: fullJSON, want: fullWant},
		{name: "no services", data: "services: []\n", want: []sources.Service{}},
		{name: "null services", data: "services:\n", want: []sources.Service{}},
		{name: "ipv6 and unknown health", data: "services:\n- name: v6\n  endpoints:\n  - {address: '::1', port: 1, health: unknown}\n",
			want: []sources.Service{{Name: "v6", Endpoints: []sources.Endpoint{{Address: "::1", Port: 1, Weight: 1}}}}},
		{name: "yaml anchors", data: "services:\n- name: a\n  endpoints: [&ep {address: 10.0.0.1, port: 80}]\n- name: b\n  endpoints: [*ep]\n",
			want: []sources.Service{
				{Name: "a", Endpoints: []sources.Endpoint{{Address: "10.0.0.1", Port: 80, Weight: 1, Health: sources.HealthHealthy}}},
				{Name: "b", Endpoints: []sources.Endpoint{{Address: "10.0.0.1", Port: 80, Weight: 1, Health: sources.HealthHealthy}}},
			}},

		{name: "port out of range", data: "services:\n- name: a\n- name: b\n  endpoints:\n  - address: 10.0.0.1\n    port: 70000\n",
			wantErr: "services[1].endpoints[0].port: 70000 is outside 1..65535 (line 6)"},
		{name: "port zero", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 0}]\n",
			wantErr: "services[0].endpoints[0].port: 0 is outside 1..65535"},
		{name: "port not a number", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: http}]\n",
			wantErr: `services[0].endpoints[0].port: want an integer, got "http"`},
		{name: "port missing", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1}]\n",
			wantErr: "services[0].endpoints[0].port: is required"},
		{name: "address not an IP is left out", data: "services:\n- name: a\n  endpoints: [{address: web.local, port: 80}, {address: 10.0.0.1, port: 80}]\n",
			want: []sources.Service{{Name: "a", Endpoints: []sources.Endpoint{{Address: "10.0.0.1", Port: 80, Weight: 1, Health: sources.HealthHealthy}}}}},
		{name: "address missing", data: "services:\n- name: a\n  endpoints: [{port: 80}]\n",
			wantErr: "services[0].endpoints[0].address: is required"},
		{name: "weight zero", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 80, weight: 0}]\n",
			wantErr: "services[0].endpoints[0].weight: 0 is outside 1..4294967295"},
		{name: "negative priority", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 80, priority: -1}]\n",
			wantErr: "services[0].endpoints[0].priority: -1 is outside 0..4294967295"},
		{name: "bad health", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 80, health: sick}]\n",
			wantErr: `services[0].endpoints[0].health: unknown health "sick"`},
		{name: "unknown endpoint field", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 80, colour: red}]\n",
			wantErr: "services[0].endpoints[0].colour: unknown field"},
		{name: "unknown locality field", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 80, locality: {city: x}}]\n",
			wantErr: "services[0].endpoints[0].locality.city: unknown field"},
		{name: "metadata not strings", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 80, metadata: {a: [1]}}]\n",
			wantErr: "services[0].endpoints[0].metadata.a: want a string, got a list"},
		{name: "unknown top-level field", data: "servics: []\n", wantErr: "servics: unknown field (line 1)"},
		{name: "services missing", data: "{}\n", wantErr: "services: is required"},
		{name: "services not a list", data: "services: {name: a}\n", wantErr: "services: want a list, got a mapping"},
		{name: "name missing", data: "services:\n- endpoints: []\n", wantErr: "services[0].name: is required"},
		{name: "duplicate service", data: "services:\n- name: a\n- name: b\n- name: a\n",
			wantErr: `services[2].name: duplicate service "a" (also services[0])`},
		{name: "duplicate endpoint", data: "services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 80}, {address: 10.0.0.1, port: 80, weight: 2}]\n",
			wantErr: "services[0].endpoints[1]: duplicate endpoint 10.0.0.1:80 (also endpoints[0])"},
		{name: "yaml syntax", data: "services: [\n", wantErr: "parsing YAML"},
		{name: "two documents", data: "services: []\n---\nservices: []\n", wantErr: "more than one document"},
		{name: "empty file", data: "\n", wantErr: "document is empty"},
		{name: "only comments", data: "# nothing\n", wantErr: "no YAML document"},
		{name: "json syntax", json: true, data: "{\"services\":\n [}", wantErr: "parsing JSON: invalid character '}' looking for beginning of value (line 2)"},
		{name: "json trailing data", json: true, data: `{"services": []} {}`, wantErr: "data after the top-level value"},
		{name: "json unknown field", json: true, data: `{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 80, "colour": "red"}]}]}`,
			wantErr: "services[0].endpoints[0].colour: unknown field"},
		{name: "json port out of range", json: true, data: `{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 70000}]}]}`,
			wantErr: "services[0].endpoints[0].port: 70000 is outside 1..65535"},
		{name: "json fractional port", json: true, data: `{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 80.5}]}]}`,
			wantErr: `services[0].endpoints[0].port: want an integer, got "80.5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.data), tt.json)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want it to contain %q", err, tt.wantErr)
				}
				if _, ok := errors.AsType[*settings.KeyError](err); !ok {
					t.Errorf("Parse() error is %T, want a *settings.KeyError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if !slices.EqualFunc(got, tt.want, sources.Service.Equal) {
				t.Errorf("Parse() = %+v\nwant %+v", got, tt.want)
			}
			for _, s := range got {
				if s.Endpoints == nil {
					t.Errorf("service %s has nil endpoints, want an empty list", s.Name)
				}
			}
		})
	}
}
