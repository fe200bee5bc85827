package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestREADMEErrorExamples checks that every error the configuration
// reference (docs/configuration.md, "Errors") shows
// ("bridge: invalid configuration ...", with the indented lines under it
// when it lists several mistakes) is what the command prints, word for
// word, for the configuration below, with exit status 2; and that every
// configuration below has its error in the README. The map's keys are the
// errors' first lines.
func TestREADMEErrorExamples(t *testing.T) {
	const static = "{name: static, type: file, path: services.yaml}"
	inputs := map[string]struct {
		config string
		env    map[string]string
	}{
		`bridge: invalid configuration bridge.yaml:1:70: sources[1].type: unknown source type "foo" (known: consul, dns, etcd, file, http, zookeeper)`: {
			config: "sources: [" + static + ", {name: x, type: foo}]"},
		`bridge: invalid configuration bridge.yaml:1:98: sources[2].name: duplicate source name "static"`: {
			config: "sources: [" + static + ", {name: a, type: file, path: a.yaml}, " + static + "]"},
		`bridge: invalid configuration bridge.yaml:1:7: xds.bogus: unknown key`: {
			config: "xds: {bogus: 1}\nsources: [" + static + "]"},
		`bridge: invalid configuration bridge.yaml:1:7: xds.listen: invalid address "x": missing port in address`: {
			config: "xds: {listen: x}\nsources: [" + static + "]"},
		`bridge: invalid configuration bridge.yaml:1:11: holdoff.min: 100 is not a duration: durations need a unit such as 100ms or 30s`: {
			config: "holdoff: {min: 100}\nsources: [" + static + "]"},
		`bridge: invalid configuration bridge.yaml:1:7: xds.max_response_bytes: "abc" is not a whole number`: {
			config: "xds: {max_response_bytes: abc}\nsources: [" + static + "]"},
		`bridge: invalid configuration bridge.yaml:1:40: sources[0].services: want a map with keys include, exclude, not the list [web, api]`: {
			config: "sources: [{name: consul, type: consul, services: [web, api]}]"},
		`bridge: invalid configuration bridge.yaml:2:23: clusters[0].cluster.lb_policy: unknown value "LEAST_REQUESTS" (want ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, CLUSTER_PROVIDED, LOAD_BALANCING_POLICY_CONFIG)`: {
			config: "sources: [" + static + "]\nclusters: [{cluster: {lb_policy: LEAST_REQUESTS}}]"},
		`bridge: invalid configuration bridge.yaml:1:9: admin.listen: 0.0.0.0:18000 collides with xds.listen (127.0.0.1:18000): a wildcard host takes port 18000 on every address`: {
			config: "admin: {listen: '0.0.0.0:18000'}\nsources: [" + static + "]"},
		`bridge: invalid configuration from environment variable BRIDGE_LOG_LEVEL: log.level: unknown level "verbose" (want debug, info, warn or error)`: {
			config: "sources: [" + static + "]", env: map[string]string{"BRIDGE_LOG_LEVEL": "verbose"}},
		`bridge: invalid configuration bridge.yaml: 3 errors:`: {
			config: "xds:\n  listne: 127.0.0.1:18000\nholdoff:\n  min: 100\nsources:\n" +
				"  - name: static\n    type: file\n    path: services.yaml\n\n    formt: yaml"},
		`bridge: invalid configuration from environment variable CONSUL_HTTP_SSL: sources[0].scheme: "yes" is not true or false`: {
			config: "sources: [{name: consul, type: consul}]", env: map[string]string{"CONSUL_HTTP_SSL": "yes"}},
	}
	readme, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	// shown maps each error's first line to the whole error.
	shown := map[string]string{}
	var last string
	for line := range strings.Lines(string(readme)) {
		switch {
		case strings.HasPrefix(line, "bridge: invalid configuration"):
			last = strings.TrimSpace(line)
			shown[last] = last + "\n"
		case last != "" && strings.HasPrefix(line, "  "):
			shown[last] += line
		default:
			last = ""
		}
	}
	for want := range inputs {
		if _, ok := shown[want]; !ok {
			t.Errorf("README does not show %s", want)
		}
	}
	for first, want := range shown {
		in, ok := inputs[first]
		if !ok {
			t.Errorf("README shows an error no test produces: %s", first)
			continue
		}
		t.Run(first, func(t *testing.T) {
			t.Chdir(t.TempDir())
			for k, v := range in.env {
				t.Setenv(k, v)
			}
			if err := os.WriteFile("bridge.yaml", []byte(in.config+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), []string{"validate", "--config", "bridge.yaml"}, &stdout, &stderr)
			if code != 2 || stderr.String() != want {
				t.Errorf("exit %d, stderr\n%s\nwant exit 2 and\n%s", code, stderr.String(), want)
			}
		})
	}
}
