package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestViewsDefaults(t *testing.T) {
	cfg, err := parse([]byte(minimal+"outputs: [{type: files, dir: xds}]\n"), "/etc/bridge", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.XDS.REST
	if cfg.XDS.ConfigCluster != "xds_cluster" || r.Enabled || r.Listen != RESTOnAdmin || r.RefreshDelay != time.Second || r.MaxRequestBytes != 1<<20 {
		t.Errorf("REST defaults: %q %+v", cfg.XDS.ConfigCluster, r)
	}
	o := cfg.Outputs[0]
	if o.Dir != "/etc/bridge/xds" || o.EnvoyDir != "/etc/bridge/xds" || !slices.Equal(o.Types, []string{"cds", "eds"}) || !o.CDS() {
		t.Errorf("output defaults: %+v", o)
	}
}

func TestViewsInvalid(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, yaml, key string }{
		{"output type", "outputs: [{type: s3, dir: x}]", "outputs[0].type: "},
		{"output dir", "outputs: [{type: files}]", "outputs[0].dir: "},
		{"output key", "outputs: [{type: files, dir: x, bogus: 1}]", "outputs[0].bogus: "},
		{"output types", "outputs: [{type: files, dir: x, types: [cds, lds]}]", "outputs[0].types[1]: "},
		{"cds without eds", "outputs: [{type: files, dir: x, types: [cds]}]", "outputs[0].types: "},
		{"envoy_dir", "outputs: [{type: files, dir: x, envoy_dir: rel}]", "outputs[0].envoy_dir: "},
		{"same dir", "outputs: [{type: files, dir: x}, {type: files, dir: /d/x}]", "outputs[1].dir: "},
		{"rest listen", "xds: {rest: {enabled: true, listen: nope}}", "xds.rest.listen: "},
		{"rest refresh", "xds: {rest: {refresh_delay: 0s}}", "xds.rest.refresh_delay: "},
		{"rest body", "xds: {rest: {max_request_bytes: 10}}", "xds.rest.max_request_bytes: "},
		{"config cluster", "xds: {config_cluster: ''}", "xds.config_cluster: "},
		{"dir under a file", "outputs: [{type: files, dir: " + file + "/xds}]", "outputs[0].dir: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse([]byte(minimal+c.yaml+"\n"), "/d", nil)
			if err == nil || !strings.HasPrefix(err.Error(), c.key) {
				t.Fatalf("error %v, want it to start with %q", err, c.key)
			}
		})
	}
}
