package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// monitoredBridge starts the bridge with an admin token and the optional
// features that export metrics of their own (istio, a secret read from a
// file), before any client or registry event, and returns the scrape of
// its /metrics.
func monitoredBridge(t *testing.T) bridgetest.Scrape {
	t.Helper()
	dir := t.TempDir()
	tlstest.NewCA(t, dir, "edge")
	writeFile(t, filepath.Join(dir, "services.yaml"), "services:\n  - {name: web, endpoints: [{address: 10.0.0.1, port: 8080}]}\n")
	writeFile(t, filepath.Join(dir, "admin-token"), "s3cret\n")
	adminAddr := freeport.Addr(t)
	cfg := filepath.Join(dir, "bridge.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
xds: {listen: %s}
admin: {listen: %s, token_file: admin-token}
istio: {enabled: true}
secrets: [{name: edge_ca, ca_file: edge-ca.pem}]
sources: [{name: static, type: file, path: services.yaml}]
`, freeport.Addr(t), adminAddr))
	start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	url := "http://" + adminAddr + "/metrics"
	if code, body := bridgetest.Get(url); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token = %d %q, want 401", code, body)
	}
	return bridgetest.ScrapeMetrics(t, url, "s3cret")
}

// has reports whether the scrape exports the metric name: a family, or a
// histogram's _bucket, _sum or _count series.
func has(m bridgetest.Scrape, name string) bool {
	if _, ok := m.Types[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && m.Types[base] == "histogram" {
			return true
		}
	}
	return false
}

// docMetric matches the metric names prose gives, brace lists included
// (xdsbridge_source_{stale,synced}).
var docMetric = regexp.MustCompile(`xdsbridge_[a-z0-9_{},]*[a-z0-9}]`)

// withoutLabels cuts the label list off a name the docs give
// (xdsbridge_source_guard_held{source,kind}): a brace that does not follow
// an underscore opens labels, one that does a list of alternatives.
func withoutLabels(name string) string {
	for i := 1; i < len(name); i++ {
		if name[i] == '{' && name[i-1] != '_' {
			return name[:i]
		}
	}
	return name
}

// expand expands the brace lists of name, recursively.
func expand(name string) []string {
	open := strings.IndexByte(name, '{')
	if open < 0 {
		return []string{name}
	}
	end := strings.IndexByte(name[open:], '}')
	if end < 0 {
		return []string{name[:open]}
	}
	var out []string
	for alt := range strings.SplitSeq(name[open+1:open+end], ",") {
		out = append(out, expand(name[:open]+alt+name[open+end+1:])...)
	}
	return out
}

// TestDocumentedMetricsExistAtStart starts the bridge and finds at /metrics,
// before any client or registry event, every metric the README, the admin
// API's and the sources' guides and docs/operations.md name, and every metric it exports in the table of
// docs/operations.md; and xdsbridge_build_info carrying the version
// `bridge version` prints.
func TestDocumentedMetricsExistAtStart(t *testing.T) {
	m := monitoredBridge(t)
	names := map[string][]string{}
	for _, doc := range []string{filepath.Join("..", "README.md"), filepath.Join("..", "docs", "admin.md"),
		filepath.Join("..", "docs", "sources.md"), filepath.Join("..", "docs", "operations.md")} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, loc := range docMetric.FindAllIndex(data, -1) {
			if rest := data[loc[1]:]; len(rest) > 1 && rest[0] == '_' && rest[1] == '*' {
				continue // xdsbridge_xds_* is a wildcard, not a name
			}
			for _, name := range expand(withoutLabels(string(data[loc[0]:loc[1]]))) {
				names[name] = append(names[name], filepath.Base(doc))
			}
		}
	}
	if len(names) < 30 {
		t.Fatalf("found %d metric names in the docs, want the metrics table of docs/operations.md", len(names))
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	}) {
		if !has(m, name) {
			t.Errorf("%s (named in %v) is not exported at start", name, slices.Compact(names[name]))
		}
	}

	// And the other way: every metric of the bridge's own is in the
	// reference table of docs/operations.md.
	ops, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range m.Types {
		if strings.HasPrefix(name, "xdsbridge_") && !strings.Contains(string(ops), "| `"+name+"` |") {
			t.Errorf("%s is exported but not in the metrics table of docs/operations.md", name)
		}
	}

	code, out := runBinary(t, 30*time.Second, "version")
	f := strings.Fields(out)
	if code != 0 || len(f) < 2 {
		t.Fatalf("bridge version: exit %d, %q", code, out)
	}
	var found []string
	for series, v := range m.Family("xdsbridge_build_info") {
		found = append(found, series)
		if v == 1 && strings.Contains(series, `version="`+f[1]+`"`) && strings.Contains(series, `goversion="go`) {
			return
		}
	}
	t.Errorf("xdsbridge_build_info %v, want the version %q that bridge version prints (%q)", found, f[1], out)
}

// promMetric matches the metric names a PromQL expression of the shipped
// dashboards and rules can name.
var promMetric = regexp.MustCompile(`\b(?:xdsbridge|go|process)_[a-zA-Z0-9_]+`)

// TestDashboardAndRulesNameExistingMetrics loads the Grafana dashboard and
// the alert rules under deploy/ and checks that every query names a metric
// a running bridge exports, and that every panel has a query.
func TestDashboardAndRulesNameExistingMetrics(t *testing.T) {
	m := monitoredBridge(t)
	check := func(where, expr string) {
		t.Helper()
		names := promMetric.FindAllString(expr, -1)
		if len(names) == 0 && !strings.Contains(expr, "up{") {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, name := range names {
			if !has(m, name) {
				t.Errorf("%s: %q names %s, which the bridge does not export", where, expr, name)
			}
		}
	}

	data, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "xdsbridge.json"))
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string
		Type    string
		Panels  []json.RawMessage
		Targets []struct{ Expr string }
	}
	var dash struct {
		Panels     []json.RawMessage
		Templating struct {
			List []struct {
				Name  string
				Type  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("xdsbridge.json: %v", err)
	}
	queries := 0
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("xdsbridge.json panel: %v", err)
			}
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				queries++
				check("panel "+p.Title, q.Expr)
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := json.Marshal(v.Query)
		check("variable "+v.Name, string(q))
	}

	rulesData, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(rulesData, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			queries++
			check("alert "+r.Alert, r.Expr)
		}
	}
	if queries < 20 {
		t.Errorf("%d queries in the dashboard and rules, want them all read", queries)
	}
}
