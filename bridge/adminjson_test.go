package bridge_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/xds"
)

// snake is how every key of the admin API's JSON is spelled, as in the
// configuration, Envoy's admin API and the REST answers.
var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// freeForm are the keys whose values are maps keyed by data (metadata
// keys, service names, note keys), not by the API.
var freeForm = map[string]bool{"metadata": true, "notes": true, "service_errors": true}

// checkKeys reports every key of v (decoded JSON) not in snake_case.
func checkKeys(t *testing.T, where string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !snake.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", where, k)
			}
			if !freeForm[k] {
				checkKeys(t, where+"."+k, x)
			}
		}
	case []any:
		for _, x := range v {
			checkKeys(t, where+"[]", x)
		}
	}
}

// TestAdminJSONIsSnakeCase checks the keys of /clients, /sources and
// /debug/why, and that /clients lists a bounded sample of the names a
// client subscribed to beside their count.
func TestAdminJSONIsSnakeCase(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range 120 {
		fmt.Fprintf(&b, "  - {name: svc-%03d, endpoints: [{address: 10.0.0.%d, port: 80, locality: {region: eu, zone: eu-1, sub_zone: r1}, metadata: {Version: v1}}]}\n", i, i+1)
	}
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	in := bridgetest.Start(t, fmt.Sprintf(`
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
sources: [{name: static, type: file, path: %s}]
`, filepath.Join(dir, "services.yaml")))
	admin := "http://" + in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String(), Node: "envoy-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitFor(ctx, func(s envoysim.State) bool { return len(s.Assignments) == 120 }); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/clients", "/sources", "/debug/why?cluster=svc-007"} {
		var v any
		getJSON(t, admin+path, &v)
		checkKeys(t, path, v)
	}

	var clients []xds.ClientStatus
	getJSON(t, admin+"/clients", &clients)
	if len(clients) != 1 {
		t.Fatalf("/clients lists %d clients, want 1", len(clients))
	}
	for _, ts := range clients[0].Types {
		if ts.TypeURL != xds.EndpointType {
			continue
		}
		if ts.Subscribed != 120 || len(ts.Names) != xds.MaxStatusNames || ts.Names[0] != "svc-000" || ts.Names[99] != "svc-099" {
			t.Errorf("/clients EDS: subscribed %d, names %d from %q; want 120 and the first %d sorted", ts.Subscribed, len(ts.Names), ts.Names[:1], xds.MaxStatusNames)
		}
		return
	}
	t.Errorf("/clients has no EDS type: %+v", clients[0])
}
