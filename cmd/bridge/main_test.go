package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	consulURL := filepath.Join(dir, "consul-url.yaml")
	noToken := filepath.Join(dir, "no-token.yaml")
	noCert := filepath.Join(dir, "no-cert.yaml")
	full := filepath.Join(dir, "full.yaml")
	services := filepath.Join(dir, "web-services.yaml")
	for path, content := range map[string]string{
		good:      "sources: [{name: static, type: file, path: services.yaml}]\n",
		bad:       "sources: [{name: static, type: nope}]\n",
		consulURL: "sources: [{name: c, type: consul, address: 'http://[::1'}]\n",
		noToken:   "sources: [{name: c, type: consul, token_file: missing-token}]\n",
		noCert:    "xds: {tls: {cert_file: c.pem, key_file: k.pem}}\nsources: [{name: c, type: consul}]\n",
		full: "sources: [{name: a, type: file, path: services.yaml}, {name: b, type: file, path: services.yaml}]\n" +
			"merge: {default: union, services: [{service: web, mode: weighted, weights: [{source: a, weight: 90}, {source: b, weight: 10}]}]}\n" +
			"outputs: [{type: files, dir: out, types: [eds]}]\n",
		services: "services:\n  - name: web\n    endpoints: [{address: 10.0.0.1, port: 80}]\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		args []string
		code int
		out  string // expected in stdout or stderr
	}{
		{"version", []string{"version"}, 0, "xdsbridge dev (go"},
		{"validate ok", []string{"validate", "--config", good}, 0, "config OK"},
		{"validate bad", []string{"validate", "--config", bad}, 2, `sources[0].type: unknown source type "nope"`},
		{"validate summary", []string{"validate", full}, 0, "  merge         default union, 1 service rules\n    - web: weighted (a=90, b=10)\n" +
			"  outputs       1\n    - files " + filepath.Join(dir, "out") + " (eds)\n"},
		{"validate a services file", []string{"validate", services}, 2, "services: unknown key; this looks like a services file for a `file` source; " +
			"the bridge configuration is the YAML file that lists it under sources (sources: [{name: static, type: file, path: web-services.yaml}])"},
		{"validate missing services file warns", []string{"validate", "--config", good}, 0, "warning: " + good + ": sources[0].path: file " + filepath.Join(dir, "services.yaml") + " does not exist"},
		{"validate consul url", []string{"validate", "--config", consulURL}, 2, "bridge: invalid configuration " + consulURL + `:1:35: sources[0].address: "http://[::1" is not an address`},
		{"validate token file", []string{"validate", "--config", noToken}, 2, "error: " + noToken + ": sources[0].token_file: file " + filepath.Join(dir, "missing-token") + " does not exist"},
		{"validate tls files", []string{"validate", "--config", noCert}, 2, "error: " + noCert + ": xds.tls.cert_file: file " + filepath.Join(dir, "c.pem")},
		{"run bad", []string{"run", "-c", bad}, 2, `sources[0].type: unknown source type "nope"`},
		{"missing config", []string{"validate"}, 2, "a configuration file is required: bridge validate FILE (or --config FILE)"},
		{"validate positional", []string{"validate", good}, 0, "config OK"},
		{"validate both the same", []string{"validate", good, "--config", good}, 0, "config OK"},
		{"validate two files", []string{"validate", good, "--config", bad}, 2, "two configuration files given"},
		{"validate positional bad", []string{"validate", bad}, 2, `sources[0].type: unknown source type "nope"`},
		{"run positional bad", []string{"run", bad}, 2, `sources[0].type: unknown source type "nope"`},
		{"two positionals", []string{"validate", good, bad}, 2, "accepts at most 1 arg"},
		{"version flag", []string{"--version"}, 0, "xdsbridge dev (go"},
		{"unknown flag", []string{"run", "--nope"}, 2, "unknown flag: --nope"},
		{"unknown command", []string{"serve"}, 2, `unknown command "serve"`},
		{"misspelled command", []string{"valdiate"}, 2, `unknown command "valdiate" for "bridge" (did you mean validate?)`},
		{"stray argument", []string{"version", "x"}, 2, "unknown command"},
		{"no command", nil, 2, "a command is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), c.args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != c.code || !strings.Contains(out, c.out) {
				t.Errorf("exit %d, output %q; want exit %d with %q", code, out, c.code, c.out)
			}
		})
	}
}
