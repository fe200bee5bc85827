package deploycheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool returns the promtool binary the tests run: $XDSBRIDGE_PROMTOOL
// (scripts/tools.sh builds it from tools/promtool), else one on PATH. Under
// XDSBRIDGE_INTEGRATION=required (make test) its absence fails the test;
// otherwise the test is skipped.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("XDSBRIDGE_PROMTOOL"); p != "" {
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("XDSBRIDGE_INTEGRATION") == "required" {
		t.Fatal("XDSBRIDGE_INTEGRATION=required but no promtool: set XDSBRIDGE_PROMTOOL (eval \"$(scripts/tools.sh)\")")
	}
	t.Skip("no promtool: set XDSBRIDGE_PROMTOOL (eval \"$(scripts/tools.sh)\")")
	return ""
}

// runPromtool runs promtool with args in dir and returns its output and
// whether it exited 0.
func runPromtool(t *testing.T, dir string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running promtool %s: %v", strings.Join(args, " "), err)
		}
	}
	return string(out), err == nil
}

// TestAlertRules checks deploy/prometheus/alerts.yaml with promtool (every
// expression parses, every template renders, the lint finds nothing) and
// runs its unit tests, alerts_test.yaml. A broken copy of the rules must
// fail the same check.
func TestAlertRules(t *testing.T) {
	dir := deployPath("prometheus")
	if out, ok := runPromtool(t, dir, "check", "rules", "--lint=all", "--lint-fatal", "alerts.yaml"); !ok {
		t.Errorf("promtool check rules alerts.yaml:\n%s", out)
	}
	if out, ok := runPromtool(t, dir, "test", "rules", "alerts_test.yaml"); !ok {
		t.Errorf("promtool test rules alerts_test.yaml:\n%s", out)
	} else {
		t.Logf("promtool test rules:\n%s", out)
	}

	broken := t.TempDir()
	rules := strings.Replace(string(readDeploy(t, "prometheus", "alerts.yaml")), "xdsbridge_ready == 0", "xdsbridge_ready == ", 1)
	if err := os.WriteFile(filepath.Join(broken, "alerts.yaml"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, ok := runPromtool(t, broken, "check", "rules", "alerts.yaml"); ok {
		t.Errorf("promtool check rules passes a rule whose expression does not parse:\n%s", out)
	}
}

// TestScrapeConfig checks deploy/prometheus/prometheus.yaml with promtool
// check config, laid out as its comment says: the rules and the admin token
// file beside it. It also checks that the scrape job sends the token, which
// the bridge's /metrics requires with admin.token_file.
func TestScrapeConfig(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"prometheus.yaml", "alerts.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), readDeploy(t, "prometheus", f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			Authorization struct {
				Type            string `json:"type"`
				CredentialsFile string `json:"credentials_file"`
			} `json:"authorization"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readDeploy(t, "prometheus", "prometheus.yaml"), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].JobName != "xdsbridge" {
		t.Fatalf("scrape configs %+v, want the one job xdsbridge", cfg.ScrapeConfigs)
	}
	auth := cfg.ScrapeConfigs[0].Authorization
	if auth.Type != "Bearer" || auth.CredentialsFile == "" || filepath.IsAbs(auth.CredentialsFile) {
		t.Fatalf("authorization %+v, want a Bearer token from a credentials_file beside the configuration", auth)
	}
	if out, ok := runPromtool(t, dir, "check", "config", "prometheus.yaml"); ok {
		t.Errorf("promtool check config passes without the token file %s:\n%s", auth.CredentialsFile, out)
	}
	if err := os.WriteFile(filepath.Join(dir, auth.CredentialsFile), []byte("placeholder\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, ok := runPromtool(t, dir, "check", "config", "--lint=all", "--lint-fatal", "prometheus.yaml"); !ok {
		t.Errorf("promtool check config prometheus.yaml:\n%s", out)
	}
}

// alertFile is what the tests read of a rules file and of its unit tests.
type alertFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertTested checks, without promtool, that alerts_test.yaml has
// for every alert a case where it fires and one where it does not, and
// that every alert's runbook_url leads to a heading of docs/operations.md.
func TestEveryAlertTested(t *testing.T) {
	var rules, tests alertFile
	for f, into := range map[string]*alertFile{"alerts.yaml": &rules, "alerts_test.yaml": &tests} {
		if err := yaml.Unmarshal(readDeploy(t, "prometheus", f), into); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	ops, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(ops), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	var n int
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: alerts_test.yaml has a firing case %v and a quiet case %v, want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			url := r.Annotations["runbook_url"]
			_, anchor, _ := strings.Cut(url, "docs/operations.md#")
			if !anchors[anchor] {
				t.Errorf("%s: runbook_url %q leads to no heading of docs/operations.md", r.Alert, url)
			}
		}
	}
	if n < 9 {
		t.Errorf("%d alerts, want at least the nine docs/operations.md describes", n)
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading: lower case,
// punctuation but hyphens dropped, spaces as hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
