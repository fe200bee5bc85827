package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateMergeAndHTTP checks that `bridge validate` reports every
// mistake in the merge section and in an http source with its key path and
// exit status 2.
func TestValidateMergeAndHTTP(t *testing.T) {
	const srcs = `sources:
  - {name: legacy-dns, type: file, path: a.yaml}
  - {name: consul, type: file, path: b.yaml}
`
	const weighted = "merge: {services: [{service: web, mode: weighted, weights: [%s]}]}\n"
	cases := []struct {
		name string
		yaml string
		code int
		out  string
	}{
		{"valid merge", srcs + "merge: {default: union, services: [{service: web, mode: weighted, weights: [{source: consul, weight: 10}]}]}", 0, "config OK"},
		{"merge unknown key", srcs + "merge: {mode: union}", 2, "merge.mode: unknown key"},
		{"merge bad default", srcs + "merge: {default: newest}", 2, `merge.default: unknown mode "newest"`},
		{"merge weighted default", srcs + "merge: {default: weighted}", 2, "merge.default: mode weighted needs weights"},
		{"merge no service", srcs + "merge: {services: [{mode: union}]}", 2, "merge.services[0].service: is required"},
		{"merge bad mode", srcs + "merge: {services: [{service: web, mode: newest}]}", 2, `merge.services[0].mode: unknown mode "newest"`},
		{"merge unknown source", srcs + strings.Replace(weighted, "%s", "{source: dns, weight: 1}", 1), 2,
			`merge.services[0].weights[0].source: unknown source "dns" (configured: legacy-dns, consul)`},
		{"merge weight range", srcs + strings.Replace(weighted, "%s", "{source: consul, weight: -5}", 1), 2,
			"merge.services[0].weights[0].weight: -5 is outside 0..10000"},
		{"merge all zero", srcs + strings.Replace(weighted, "%s", "{source: consul, weight: 0}", 1), 2,
			"merge.services[0].weights: at least one weight must be positive"},
		{"valid http", "sources: [{name: cmdb, type: http, url: 'https://cmdb/x', tls: {ca_file: ca.pem}}]", 0, "config OK"},
		{"http no url", "sources: [{name: cmdb, type: http}]", 2, "sources[0].url: is required"},
		{"http bad scheme", "sources: [{name: cmdb, type: http, url: 'file:///x'}]", 2, `sources[0].url: scheme "file" is not http or https`},
		{"http bad interval", "sources: [{name: cmdb, type: http, url: 'http://x/', interval: 0s}]", 2, "sources[0].interval: must be positive"},
		{"http bad body limit", "sources: [{name: cmdb, type: http, url: 'http://x/', max_body_bytes: 0}]", 2, "sources[0].max_body_bytes: 0 is outside"},
		{"http tls on http", "sources: [{name: cmdb, type: http, url: 'http://x/', tls: {ca_file: ca.pem}}]", 2, "sources[0].tls: applies to https URLs only"},
		{"http half a key pair", "sources: [{name: cmdb, type: http, url: 'https://x/', tls: {cert_file: c.pem}}]", 2, "sources[0].tls.key_file: is required"},
		{"http unknown key", "sources: [{name: cmdb, type: http, url: 'http://x/', token_file: t}]", 2, "sources[0].token_file: unknown key"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), []string{"validate", "--config", path}, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != c.code || !strings.Contains(out, c.out) {
				t.Errorf("exit %d, output %q; want exit %d with %q", code, out, c.code, c.out)
			}
		})
	}
}
