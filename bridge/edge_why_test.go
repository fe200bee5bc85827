package bridge_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
)

// TestWhyRoute: two services claiming the same path by their tags are a
// conflict with the designed outcome (the service whose name sorts first
// is served), shown by /debug/why?route=HOST/PATH with the claim served
// and the one not served, and counted; a tag stating a route the bridge
// cannot serve is dropped and counted, the rest served.
func TestWhyRoute(t *testing.T) {
	dir := t.TempDir()
	services := `services:
  - name: api
    endpoints: [{address: 10.0.0.1, port: 80, metadata: {tags: "urlprefix-/api"}}]
  - name: api-copy
    endpoints: [{address: 10.0.0.2, port: 80, metadata: {tags: "urlprefix-/api"}}]
  - name: odd
    endpoints: [{address: 10.0.0.3, port: 80, metadata: {tags: "urlprefix-nopath"}}]
`
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(services), 0o600); err != nil {
		t.Fatal(err)
	}
	in := bridgetest.StartIn(t, dir, `
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
sources: [{name: static, type: file, path: services.yaml}]
routes:
  - config: edge
    hosts: ["{service}.example.com"]
`, io.Discard)
	admin := "http://" + in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)

	var why []bridge.WhyRoute
	bridgetest.Eventually(t, bridgetest.Patience, "/debug/why?route= to name the served claim", func() bool {
		code, body := bridgetest.Get(admin + "/debug/why?route=any.example.com/api/users")
		why = nil
		return code == 200 && json.Unmarshal([]byte(body), &why) == nil && len(why) == 1 && why[0].Claim != nil
	})
	w := why[0]
	if w.RouteConfig != "edge" || w.Cluster != "api" || w.Prefix != "/api" || w.Claim.Service != "api" || !strings.Contains(w.Claim.From, "urlprefix-/api") {
		t.Errorf("why = %+v (claim %+v), want edge's /api to api, claimed by its tag", w, *w.Claim)
	}
	if len(w.NotServed) != 1 || w.NotServed[0].Service != "api-copy" {
		t.Errorf("not served %+v, want api-copy's claim", w.NotServed)
	}
	// A service's own host is its own, whatever the conflict.
	code, body := bridgetest.Get(admin + "/debug/why?route=api-copy.example.com/")
	var own []bridge.WhyRoute
	if code != 200 || json.Unmarshal([]byte(body), &own) != nil || len(own) != 1 || own[0].Cluster != "api-copy" {
		t.Errorf("why api-copy.example.com/ = %d %s, want its cluster", code, body)
	}
	_, metrics := bridgetest.Get(admin + "/metrics")
	for _, want := range []string{"xdsbridge_route_conflicts 1", "xdsbridge_route_claims_dropped 1"} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}
