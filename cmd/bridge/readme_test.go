package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// documented are the documents whose command lines must work.
var documented = []string{"README.md", "docs/admin.md", "docs/configuration.md", "docs/edge.md", "docs/migration.md", "docs/shaping.md",
	"docs/deployment.md", "docs/security.md", "docs/reload.md", "docs/clients.md", "docs/sources.md"}

var (
	// fence is a fenced code block; its lines that run bridge (bridge,
	// bin/bridge or go run ./cmd/bridge) are command lines, with their
	// continuation lines.
	fence    = regexp.MustCompile("(?ms)^```[a-z]*\n(.*?)^```")
	runLine  = regexp.MustCompile(`(?m)^\s*(?:bridge|bin/bridge|go run \./cmd/bridge) ((?:[^\n]*\\\n)*[^\n]*)`)
	codeSpan = regexp.MustCompile("`bridge ([^`]*)`")
)

// commandLines returns the bridge command lines of a Markdown document,
// each without the program name.
func commandLines(doc string) []string {
	var out []string
	for _, block := range fence.FindAllStringSubmatch(doc, -1) {
		for _, m := range runLine.FindAllStringSubmatch(block[1], -1) {
			out = append(out, m[1])
		}
	}
	for _, m := range codeSpan.FindAllStringSubmatch(fence.ReplaceAllString(doc, ""), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDocumentedCommandLines checks every bridge command line of the
// documents against the command tree: the command exists and takes every
// flag shown. It also checks that the README names every command.
func TestDocumentedCommandLines(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	readme := ""
	for _, doc := range documented {
		data, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		if doc == "README.md" {
			readme = string(data)
		}
		for _, line := range commandLines(string(data)) {
			// A pipe or a comment ends the command; brackets mark options.
			line, _, _ = strings.Cut(line, "|")
			line, _, _ = strings.Cut(line, "#")
			line = strings.NewReplacer("\\\n", " ", "[", " ", "]", " ").Replace(line)
			words := strings.Fields(line)
			if len(words) == 0 || words[0] == strings.ToUpper(words[0]) {
				continue // a placeholder such as COMMAND
			}
			cmd, rest, err := root.Find(words)
			if err != nil || cmd == root {
				t.Errorf("%s: `bridge %s`: no such command (%v)", doc, line, err)
				continue
			}
			checkFlags(t, doc, cmd, rest)
		}
	}
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && !strings.Contains(readme, "bridge "+c.Name()) {
			t.Errorf("README.md never shows `bridge %s`", c.Name())
		}
	}
}

// checkFlags reports the flags among args that cmd does not take.
func checkFlags(t *testing.T, doc string, cmd *cobra.Command, args []string) {
	t.Helper()
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			if short, isShort := strings.CutPrefix(a, "-"); isShort && len(short) == 1 && cmd.Flags().ShorthandLookup(short) == nil {
				t.Errorf("%s: `bridge %s`: no flag -%s", doc, cmd.Name(), short)
			}
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil && name != "help" {
			t.Errorf("%s: `bridge %s`: no flag --%s", doc, cmd.Name(), name)
		}
	}
}

// TestHelp checks what the help of run and dump says and leaves out.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"run", "--help"},
			[]string{"SIGHUP", "SIGINT, SIGTERM", "BRIDGE_XDS_LISTEN", "BRIDGE_<KEY>", "Exit codes:", "2   invalid configuration", "--xds-listen"}, nil},
		{[]string{"dump", "--help"}, []string{"--node-cluster", "--type strings", "dynamic_active_clusters", "Exit codes"},
			[]string{"--xds-listen", "--admin-listen"}},
		{[]string{"healthcheck", "--help"}, []string{"HEALTHCHECK", "--ca-file", "--token-file"}, nil},
		{[]string{"--help"}, []string{"status", "config", "healthcheck", "--version"}, nil},
	} {
		code, out, errOut := runBridge(c.args...)
		if code != 0 {
			t.Errorf("%v: exit %d %s", c.args, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("%v shows %q:\n%s", c.args, n, out)
			}
		}
	}
}
