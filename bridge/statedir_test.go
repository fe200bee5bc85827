package bridge_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/manager/statedir"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
)

// TestStateDirHealth: a state_dir that cannot be written shows in /state,
// /readyz (a warning; the bridge stays ready: it serves as usual, only a
// restart would miss the state), /metrics and the status page, and is
// logged once however often the write is retried; once it can be written
// again all of that clears, and the recovery is logged once.
func TestStateDirHealth(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"),
		[]byte("services:\n  - {name: web, endpoints: [{address: 10.0.0.1, port: 80}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file where the state directory's parent should be: no process,
	// root included, can create the directory.
	blocked := filepath.Join(dir, "blocked")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	in := bridgetest.StartIn(t, dir, "xds: {listen: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nstate_dir: blocked/state\n"+
		"sources:\n  - {name: static, type: file, path: services.yaml}\n", &logs)
	admin := "http://" + in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)

	state := func() manager.StateDirStatus {
		_, body := bridgetest.Get(admin + "/state")
		var st manager.StateDirStatus
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("/state: %v: %q", err, body)
		}
		return st
	}
	// Two failed writes at least: the second is retried after a backoff
	// of a second or so, and must not be logged again.
	bridgetest.Eventually(t, bridgetest.Patience, "two failed writes in /state", func() bool { return state().Failures >= 2 })
	st := state()
	if !st.Enabled || !st.Failing || !strings.Contains(st.Error, "not a directory") || st.Path != filepath.Join(blocked, "state", "state.json") || st.Since.IsZero() {
		t.Errorf("/state = %+v, want enabled, failing since a time, the error and the file", st)
	}
	code, body := bridgetest.Get(admin + "/readyz")
	if code != http.StatusOK || !strings.Contains(body, "warning: cannot persist the state for warm starts to "+st.Path) {
		t.Errorf("/readyz = %d %q, want 200 with a warning naming the file", code, body)
	}
	m := bridgetest.ScrapeMetrics(t, admin+"/metrics", "")
	for series, want := range map[string]float64{"xdsbridge_state_dir_configured": 1, "xdsbridge_state_dir_failing": 1,
		"xdsbridge_state_dir_last_write_timestamp_seconds": 0} {
		if got, ok := m.Values[series]; !ok || got != want {
			t.Errorf("%s = %v (exported: %v), want %v", series, got, ok, want)
		}
	}
	if got := m.Values["xdsbridge_state_dir_write_failures_total"]; got < 2 {
		t.Errorf("xdsbridge_state_dir_write_failures_total = %v, want at least 2", got)
	}
	if _, page := bridgetest.Get(admin + "/"); !strings.Contains(page, `id="state"`) || !strings.Contains(page, "cannot persist the state") {
		t.Error("the status page does not show the failing state directory among its problems")
	}
	if n := strings.Count(logs.String(), "cannot persist the state for warm starts"); n != 1 {
		t.Errorf("%d log lines about the failing state directory after %d failures, want 1:\n%s", n, state().Failures, logs.String())
	}

	// The directory can be made now: the next retry writes the state.
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	bridgetest.Eventually(t, bridgetest.Patience, "the state written", func() bool { st := state(); return !st.Failing && !st.Saved.IsZero() })
	if _, err := os.Stat(st.Path); err != nil {
		t.Errorf("the state file: %v", err)
	}
	if code, body := bridgetest.Get(admin + "/readyz"); code != http.StatusOK || strings.Contains(body, "warning") {
		t.Errorf("/readyz = %d %q once the state is written, want 200 without a warning", code, body)
	}
	m = bridgetest.ScrapeMetrics(t, admin+"/metrics", "")
	if m.Values["xdsbridge_state_dir_failing"] != 0 || m.Values["xdsbridge_state_dir_last_write_timestamp_seconds"] == 0 {
		t.Errorf("after the write: failing %v, last write %v; want 0 and a time",
			m.Values["xdsbridge_state_dir_failing"], m.Values["xdsbridge_state_dir_last_write_timestamp_seconds"])
	}
	if _, page := bridgetest.Get(admin + "/"); strings.Contains(page, `id="state"`) {
		t.Error("the status page still shows the state directory as a problem")
	}
	if n := strings.Count(logs.String(), "persisting the state for warm starts again"); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
}

// TestStateDirUnreadable: a state file that cannot be read (here cut
// short, as by a full disk under an older writer or a copy interrupted)
// is no crash and no partial state: the bridge starts as without it, says
// why once in the log and for the life of the process in /state, /readyz
// (a warning), /metrics and the status page, and its next write replaces
// the file with one a restart can read.
func TestStateDirUnreadable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"),
		[]byte("services:\n  - {name: web, endpoints: [{address: 10.0.0.1, port: 80}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(dir, "state", statedir.FileName)
	if err := os.MkdirAll(filepath.Dir(stateFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile, []byte(`{"format":"`+statedir.Format+`","checksum":"`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	in := bridgetest.StartIn(t, dir, "xds: {listen: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nstate_dir: state\n"+
		"sources:\n  - {name: static, type: file, path: services.yaml}\n", &logs)
	admin := "http://" + in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)

	_, body := bridgetest.Get(admin + "/state")
	var st manager.StateDirStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/state: %v: %q", err, body)
	}
	if !strings.Contains(st.LoadError, stateFile) || !strings.Contains(st.LoadError, "truncated") {
		t.Errorf("/state load_error = %q, want the file and why it was ignored", st.LoadError)
	}
	if code, body := bridgetest.Get(admin + "/readyz"); code != http.StatusOK ||
		!strings.Contains(body, "warning: started without the persisted state for warm starts, which could not be read: "+st.LoadError) {
		t.Errorf("/readyz = %d %q, want 200 with a warning saying why", code, body)
	}
	m := bridgetest.ScrapeMetrics(t, admin+"/metrics", "")
	if got := m.Values["xdsbridge_state_dir_load_failed"]; got != 1 {
		t.Errorf("xdsbridge_state_dir_load_failed = %v, want 1", got)
	}
	if _, page := bridgetest.Get(admin + "/"); !strings.Contains(page, `id="state-load"`) {
		t.Error("the status page does not show the unreadable state among its problems")
	}
	if n := strings.Count(logs.String(), "ignoring the persisted state for warm starts"); n != 1 {
		t.Errorf("%d log lines about the unreadable state, want 1:\n%s", n, logs.String())
	}

	// The next write replaces the file with one this version reads.
	bridgetest.Eventually(t, bridgetest.Patience, "the state written", func() bool {
		_, body := bridgetest.Get(admin + "/state")
		var st manager.StateDirStatus
		return json.Unmarshal([]byte(body), &st) == nil && !st.Saved.IsZero()
	})
	if _, err := statedir.New(filepath.Dir(stateFile), nil, nil).Load(); err != nil {
		t.Errorf("the state file written after an unreadable one: %v", err)
	}
}

// TestStateDirReadsEarlierFormat: a bridge upgraded from a version that
// wrote the first state file format keeps its warm start: restarted while
// its source cannot sync (its file is missing), it serves the services of
// that file, and its next write rewrites the file in the current format.
func TestStateDirReadsEarlierFormat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(path, []byte("xds: {listen: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nstate_dir: state\n"+
		"sources:\n  - {name: static, type: file, path: services.yaml}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Entries[0]
	// As the first format's writer wrote it: the model's Go field names,
	// health as a number.
	payload := `[{"name":"static","fingerprint":"` + statedir.Fingerprint(e.Name, e.Type, e.Settings) + `","services":[` +
		`{"Name":"web","Endpoints":[{"Address":"10.0.0.7","Port":8080,"Weight":0,"Priority":0,"Health":1,` +
		`"Locality":{"Region":"","Zone":"z1","SubZone":""},"Metadata":{"v":"1"},"Origin":{"Source":"static","Record":"","Transforms":null}}],` +
		`"Source":"static","Localities":null}]}]`
	sum := sha256.Sum256([]byte(payload))
	stateFile := filepath.Join(dir, "state", statedir.FileName)
	if err := os.MkdirAll(filepath.Dir(stateFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile, []byte(`{"format":"xdsbridge-state/1","checksum":"`+hex.EncodeToString(sum[:])+
		`","sources":`+payload+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	in := bridgetest.StartFile(t, path, io.Discard)
	admin := in.AdminAddr().String()
	bridgetest.WaitReady(t, admin, bridgetest.Patience)
	if st := bridgetest.SourceStatus(t, admin, "static"); st.Startup != manager.PhaseWarm {
		t.Errorf("source startup %q, want %q: served from the earlier format's file", st.Startup, manager.PhaseWarm)
	}
	if _, dump := bridgetest.Get("http://" + admin + "/debug/config_dump"); !strings.Contains(dump, "10.0.0.7") {
		t.Errorf("the endpoint of the earlier format's file is not served:\n%s", dump)
	}
	bridgetest.Eventually(t, bridgetest.Patience, "the state rewritten in the current format", func() bool {
		b, err := os.ReadFile(stateFile)
		return err == nil && strings.HasPrefix(string(b), `{"format":"`+statedir.Format+`"`)
	})
	if got, err := statedir.New(filepath.Dir(stateFile), map[string]string{e.Name: statedir.Fingerprint(e.Name, e.Type, e.Settings)},
		nil).Load(); err != nil || len(got["static"]) != 1 || got["static"][0].Endpoints[0].Address != "10.0.0.7" {
		t.Errorf("the rewritten file loads as %v, %v; want the service of the earlier one", got, err)
	}
}
