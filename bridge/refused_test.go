package bridge_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
)

// TestRefusedShownInSources checks that a service whose assignment alone
// exceeds xds.max_response_bytes is refused by the engine, reported in
// /sources under the source that reports it, and that the other services
// are served.
func TestRefusedShownInSources(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("services:\n  - name: small\n    endpoints: [{address: 10.0.0.1, port: 80}]\n  - name: huge\n    endpoints:\n")
	for i := range 5000 { // about 20 bytes each on the wire: over the 64 KiB limit below
		fmt.Fprintf(&b, "      - {address: 10.%d.%d.%d, port: 8080}\n", i>>16&255, i>>8&255, i&255)
	}
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	in := bridgetest.StartIn(t, dir, `
xds: {listen: 127.0.0.1:0, max_response_bytes: 65536, send_budget_bytes: 65536}
admin: {listen: 127.0.0.1:0}
sources: [{name: static, type: file, path: services.yaml}]
`, io.Discard)
	admin := "http://" + in.AdminAddr().String()
	var errs map[string]string
	bridgetest.Eventually(t, bridgetest.Patience, "huge reported in /sources", func() bool {
		code, body := bridgetest.Get(admin + "/sources")
		if code != 200 {
			return false
		}
		var st []struct {
			Name          string            `json:"name"`
			ServiceErrors map[string]string `json:"service_errors"`
		}
		if json.Unmarshal([]byte(body), &st) != nil || len(st) != 1 {
			return false
		}
		errs = st[0].ServiceErrors
		return errs["huge"] != ""
	})
	if len(errs) != 1 || !strings.Contains(errs["huge"], "max_response_bytes") && !strings.Contains(errs["huge"], "limit") {
		t.Errorf("service errors = %v, want only huge, naming the size limit", errs)
	}
	// The refusal is reported from inside the Apply that serves small.
	bridgetest.Eventually(t, bridgetest.Patience, "small served", func() bool {
		code, body := bridgetest.Get(admin + "/debug/config_dump")
		return code == 200 && strings.Contains(body, `"small"`)
	})
	code, body := bridgetest.Get(admin + "/debug/why?cluster=huge")
	if code != 200 {
		t.Errorf("/debug/why?cluster=huge: %d %.200s", code, body)
	}
}
