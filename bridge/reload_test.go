package bridge_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/internal/bridgetest"
)

// TestReload checks what a reload keeps, starts and stops, that settings
// needing a restart are reported and not applied, and that an invalid
// configuration is rejected whole.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	for name, addr := range map[string]string{"one": "10.0.0.1", "two": "10.0.0.2", "three": "10.0.0.3"} {
		content := fmt.Sprintf("services:\n  - name: %s\n    endpoints: [{address: %s, port: 80}]\n", name, addr)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := "xds: {listen: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nsources:\n"
	in := bridgetest.StartIn(t, dir, base+"  - {name: a, type: file, path: one.yaml}\n  - {name: b, type: file, path: two.yaml}\n", io.Discard)
	admin := "http://" + in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)

	load := func(yaml string) func() (*config.Config, error) {
		return func() (*config.Config, error) {
			path := filepath.Join(dir, "next.yaml")
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			return config.Load(path, nil)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Patience)
	defer cancel()
	res, err := in.Reload(ctx, load("xds: {listen: 127.0.0.1:1}\nadmin: {listen: 127.0.0.1:0}\nsources:\n"+
		"  - {name: c, type: file, path: three.yaml}\n  - {name: a, type: file, path: one.yaml}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.String(); got != "kept [a], started [c], stopped [b], need restart [xds.listen]" {
		t.Errorf("reload: %s", got)
	}
	bridgetest.Eventually(t, bridgetest.Patience, "/sources to list c and a", func() bool {
		_, body := bridgetest.Get(admin + "/sources")
		c, a := strings.Index(body, `"name": "c"`), strings.Index(body, `"name": "a"`)
		return c >= 0 && c < a && !strings.Contains(body, `"name": "b"`)
	})

	for _, bad := range []string{"sources: [{name: x, type: nope}]", "xds: {listen: [}"} {
		if _, err := in.Reload(ctx, load(bad)); err == nil {
			t.Errorf("reload of %q accepted", bad)
		}
	}
	_, metrics := bridgetest.Get(admin + "/metrics")
	for _, want := range []string{`xdsbridge_config_reloads_total{result="applied"} 1`, `xdsbridge_config_reloads_total{result="rejected"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The rejected reloads left the sources as they were; the restart
	// setting was never applied, so reloading the original text reports
	// only the source changes.
	res, err = in.Reload(ctx, load(base+"  - {name: a, type: file, path: one.yaml}\n  - {name: b, type: file, path: two.yaml}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Kept, []string{"a"}) || len(res.NeedRestart) != 0 {
		t.Errorf("reload back: %s", res)
	}
}
