package translate

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// FuzzNewRule feeds arbitrary cluster fragments to NewRule: it never
// panics, and every error is one line naming a key under "cluster",
// without protojson's position or prefix.
//
// `make fuzz` (part of `make test`) runs it with the other fuzz targets;
// to run it alone:
//
//	go test -run='^$' -fuzz='^FuzzNewRule$' -fuzztime=10s ./translate/
func FuzzNewRule(f *testing.F) {
	for _, seed := range []string{
		"lb_policy: LEAST_REQUEST",
		"outlier_detection: {consecutive_5xx: 5, interval: 100ms}",
		"circuit_breakers: {thresholds: [{priority: HIGH, max_connections: 10}]}",
		"common_lb_config: {healthy_panic_threshold: {value: 150}}",
		`transport_socket: {name: tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, sni: x}}`,
		"metadata: {filter_metadata: {a: {b: [1, 2]}}}",
		"connect_timeout: 0",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var fragment map[string]any
		if yaml.Unmarshal([]byte(text), &fragment) != nil {
			return
		}
		_, err := NewRule(sources.Selector{}, AllClients, fragment)
		if err == nil {
			return
		}
		var ke *settings.KeyError
		msg := err.Error()
		if !errors.As(err, &ke) || !strings.HasPrefix(ke.Key, "cluster") || strings.Contains(msg, "\n") ||
			strings.Contains(msg, "proto:") || strings.Contains(msg, "(line ") {
			t.Fatalf("error %q", msg)
		}
	})
}
