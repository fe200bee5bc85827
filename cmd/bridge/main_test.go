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
	for path, content := range map[string]string{
		good: "sources: [{name: static, type: file, path: services.yaml}]\n",
		bad:  "sources: [{name: static, type: nope}]\n",
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
		{"run bad", []string{"run", "-c", bad}, 2, `sources[0].type: unknown source type "nope"`},
		{"missing config flag", []string{"validate"}, 2, "--config is required"},
		{"unknown flag", []string{"run", "--nope"}, 2, "unknown flag: --nope"},
		{"unknown command", []string{"serve"}, 2, `unknown command "serve"`},
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
