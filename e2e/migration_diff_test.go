package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestMigrationDiffIsClean runs docs/migration.md's comparison of step 3
// for the static-to-eds example: `bridge dump --type cds --format json`,
// a cluster taken out of it as jq -S would, diffed against the same
// cluster as the old Envoy's /config_dump?resource=static_clusters shows
// it (proto JSON with proto field names, here rendered from
// envoy-before.yaml). The diff must be the one the document shows, and it
// may only touch what the move changes by design: the discovery type, the
// EDS config and the inline endpoints. A key spelled differently on the
// two sides (lbPolicy against lb_policy) would show as a changed line.
func TestMigrationDiffIsClean(t *testing.T) {
	diffBin, err := exec.LookPath("diff")
	if err != nil {
		t.Skip("no diff program")
	}
	dir := filepath.Join(migration, "static-to-eds")
	code, out := runBinaryStdout(t, "dump", filepath.Join(dir, "bridge.yaml"), "--type", "cds", "--format", "json")
	if code != 0 {
		t.Fatalf("bridge dump: exit %d\n%s", code, out)
	}
	var dumpDoc struct {
		Configs []struct {
			Clusters []struct {
				Cluster json.RawMessage `json:"cluster"`
			} `json:"dynamic_active_clusters"`
		} `json:"configs"`
	}
	if err := json.Unmarshal([]byte(out), &dumpDoc); err != nil || len(dumpDoc.Configs) != 1 {
		t.Fatalf("bridge dump --type cds: want one config, the clusters (%v):\n%s", err, out)
	}
	served := map[string][]byte{}
	for _, c := range dumpDoc.Configs[0].Clusters {
		served[clusterName(t, c.Cluster)] = sortedJSON(t, c.Cluster)
	}

	allowed := regexp.MustCompile(`^[-+]\s*("(type|eds_cluster_config|eds_config|ads|resource_api_version|load_assignment|cluster_name|endpoints|lb_endpoints|endpoint|address|socket_address|port_value)":|[\]\[{}],?$)`)
	tmp := t.TempDir()
	for _, old := range bootstrap(t, filepath.Join(dir, "envoy-before.yaml")).GetStaticResources().GetClusters() {
		a, err := anypb.New(old)
		if err != nil {
			t.Fatal(err)
		}
		js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		name := old.GetName()
		if served[name] == nil {
			t.Fatalf("the bridge serves no cluster %q", name)
		}
		envoyFile, bridgeFile := filepath.Join(tmp, "envoy-"+name+".json"), filepath.Join(tmp, "bridge-"+name+".json")
		for file, data := range map[string][]byte{envoyFile: sortedJSON(t, js), bridgeFile: served[name]} {
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		d, _ := exec.Command(diffBin, "-u", envoyFile, bridgeFile).Output()
		lines := strings.SplitAfterN(string(d), "\n", 3)
		if len(lines) < 3 {
			t.Fatalf("cluster %q: no difference at all; want at least the type", name)
		}
		body := lines[2]
		// A line removed and added again is one diff moved around a
		// change, not a change; what is left must be by design.
		changed := map[string]int{}
		for l := range strings.Lines(body) {
			switch {
			case strings.HasPrefix(l, "-"):
				changed[strings.TrimRight(l[1:], "\n")]--
			case strings.HasPrefix(l, "+"):
				changed[strings.TrimRight(l[1:], "\n")]++
			}
		}
		for l, n := range changed {
			if n != 0 && !allowed.MatchString("+"+l) {
				t.Errorf("cluster %q: the diff changes %q, which the move should keep", name, strings.TrimSpace(l))
			}
		}
		if name == "web" {
			doc, err := os.ReadFile(filepath.Join("..", "docs", "migration.md"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(doc, []byte("```diff\n"+body+"```\n")) {
				t.Errorf("docs/migration.md does not show the diff of web as it is now:\n```diff\n%s```", body)
			}
		}
	}
}

// clusterName is the name of a cluster in proto JSON.
func clusterName(t *testing.T, js []byte) string {
	t.Helper()
	var c struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(js, &c); err != nil {
		t.Fatal(err)
	}
	return c.Name
}

// sortedJSON is js as `jq -S .` prints it: keys sorted at every level,
// two spaces of indentation, a final newline.
func sortedJSON(t *testing.T, js []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// runBinaryStdout runs the bridge with args and returns its exit code and
// stdout (stderr is added after it when the exit code is not 0).
func runBinaryStdout(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Fatalf("running bridge %v: %v", args, err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return code, stdout.String() + stderr.String()
	}
	return 0, stdout.String()
}
