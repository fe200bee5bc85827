package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
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

// post sends an empty POST to url with a bearer token (none if empty) and
// returns the status and body.
func post(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// reloadFixture writes the services files one.yaml and two.yaml to dir
// and returns a configuration head (everything but the sources list,
// with extra appended) and the two source entries.
func reloadFixture(t *testing.T, dir, extra string) (head, a, b string) {
	t.Helper()
	for name, addr := range map[string]string{"one": "10.0.0.1", "two": "10.0.0.2"} {
		content := fmt.Sprintf("services:\n  - name: %s\n    endpoints: [{address: %s, port: 80}]\n", name, addr)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return "xds: {listen: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0" + extra + "}\n",
		"  - {name: a, type: file, path: one.yaml}\n", "  - {name: b, type: file, path: two.yaml}\n"
}

// replace writes content to path atomically, by a rename, as editors do.
func replace(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloads returns the applied and rejected reload counts /metrics shows.
func reloads(t *testing.T, admin, token string) string {
	t.Helper()
	_, metrics := bridgetest.GetAuth(admin+"/metrics", token)
	var out []string
	for _, result := range []string{"applied", "rejected"} {
		for l := range strings.Lines(metrics) {
			if strings.HasPrefix(l, `xdsbridge_config_reloads_total{result="`+result+`"}`) {
				out = append(out, result+" "+strings.TrimSpace(l[strings.LastIndex(l, " "):]))
			}
		}
	}
	return strings.Join(out, ", ")
}

// sourceNames returns the names /sources lists, in order.
func sourceNames(t *testing.T, admin, token string) string {
	t.Helper()
	code, body := bridgetest.GetAuth(admin+"/sources", token)
	var all []manager.SourceStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &all) != nil {
		t.Fatalf("/sources = %d %q", code, body)
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

// TestReloadAdminEndpoint checks POST /-/reload: behind the admin token,
// it applies the file and answers what the reload did; a bad file is
// answered 400 with the error, counted like a rejected SIGHUP, and the
// running configuration stays.
func TestReloadAdminEndpoint(t *testing.T) {
	dir := t.TempDir()
	const token = "reload-token"
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head, a, b := reloadFixture(t, dir, ", token_file: admin-token")
	in := bridgetest.StartIn(t, dir, head+"sources:\n"+a, io.Discard)
	admin := "http://" + in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)
	path := filepath.Join(dir, "bridge.yaml")

	replace(t, path, head+"sources:\n"+a+b)
	if code, body := post(t, admin+"/-/reload", ""); code != http.StatusUnauthorized {
		t.Errorf("POST /-/reload without the token = %d %q, want 401", code, body)
	}
	if got := reloads(t, admin, token); got != "applied 0, rejected 0" {
		t.Errorf("after the refused request: %s, want no reload", got)
	}
	code, body := post(t, admin+"/-/reload", token)
	var res bridge.ReloadResult
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil ||
		!slices.Equal(res.Kept, []string{"a"}) || !slices.Equal(res.Started, []string{"b"}) {
		t.Fatalf("POST /-/reload = %d %q, want 200 and a kept, b started", code, body)
	}
	if got := sourceNames(t, admin, token); got != "a,b" {
		t.Errorf("/sources lists %s after the reload, want a,b", got)
	}

	replace(t, path, head+"sources:\n"+a+"  - {name: x, type: nope}\n")
	code, body = post(t, admin+"/-/reload", token)
	if code != http.StatusBadRequest || !strings.Contains(body, "sources[1].type") || !strings.Contains(body, "running configuration stays") {
		t.Errorf("POST /-/reload of a bad file = %d %q, want 400 naming sources[1].type", code, body)
	}
	if got := reloads(t, admin, token); got != "applied 1, rejected 1" {
		t.Errorf("counters: %s, want applied 1, rejected 1", got)
	}
	if got := sourceNames(t, admin, token); got != "a,b" {
		t.Errorf("/sources lists %s after the rejected reload, want a,b", got)
	}
	if code, _ := bridgetest.GetAuth(admin+"/-/reload", token); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload = %d, want 405", code)
	}
}

// watchedReloads runs the steps of the watch tests: change, a bad file,
// change back, each written by write; /sources and the counters tell that
// the watch applied or rejected it.
func watchedReloads(t *testing.T, admin string, write func(content string), head, a, b string) {
	t.Helper()
	write(head + "sources:\n" + a + b)
	bridgetest.Eventually(t, bridgetest.Patience, "the watch to apply the change", func() bool {
		return reloads(t, admin, "") == "applied 1, rejected 0" && sourceNames(t, admin, "") == "a,b"
	})
	write(head + "sources:\n" + a + "  - {name: x, type: nope}\n")
	bridgetest.Eventually(t, bridgetest.Patience, "the watch to reject the bad file", func() bool {
		return reloads(t, admin, "") == "applied 1, rejected 1"
	})
	if got := sourceNames(t, admin, ""); got != "a,b" {
		t.Errorf("/sources lists %s after the rejected file, want a,b", got)
	}
	write(head + "sources:\n" + b)
	bridgetest.Eventually(t, bridgetest.Patience, "the watch to apply the fixed file", func() bool {
		return reloads(t, admin, "") == "applied 2, rejected 1" && sourceNames(t, admin, "") == "b"
	})
}

// TestReloadWatchConfig checks reload.watch_config with a file replaced by
// a rename and written in place.
func TestReloadWatchConfig(t *testing.T) {
	dir := t.TempDir()
	head, a, b := reloadFixture(t, dir, "")
	head += "reload: {watch_config: true}\n"
	in := bridgetest.StartIn(t, dir, head+"sources:\n"+a, io.Discard)
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)
	path := filepath.Join(dir, "bridge.yaml")
	n := 0
	watchedReloads(t, "http://"+in.AdminAddr().String(), func(content string) {
		n++
		if n%2 == 0 {
			replace(t, path, content)
			return
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}, head, a, b)
}

// TestReloadWatchConfigMap checks reload.watch_config with the file in a
// Kubernetes ConfigMap volume: the file is a link through ..data, a link
// to a directory of the data's version, which an update swaps (a new
// directory, a new link renamed over ..data, the old directory deleted).
func TestReloadWatchConfigMap(t *testing.T) {
	dir := t.TempDir()
	head, a, b := reloadFixture(t, dir, "")
	head += "reload: {watch_config: true}\n"
	version, n := "", 0
	swap := func(content string) {
		n++
		next := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", n, n*7919)
		if err := os.Mkdir(filepath.Join(dir, next), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, next, "bridge.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(next, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if version != "" {
			if err := os.RemoveAll(filepath.Join(dir, version)); err != nil {
				t.Fatal(err)
			}
		}
		version = next
	}
	swap(head + "sources:\n" + a)
	path := filepath.Join(dir, "bridge.yaml")
	if err := os.Symlink(filepath.Join("..data", "bridge.yaml"), path); err != nil {
		t.Fatal(err)
	}
	in := bridgetest.StartFile(t, path, io.Discard)
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)
	watchedReloads(t, "http://"+in.AdminAddr().String(), swap, head, a, b)
}
