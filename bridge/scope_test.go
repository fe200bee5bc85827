package bridge_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/xds"
)

// scopedConfig serves four services and scopes the pay-* nodes to the
// services matching payGlob, payroll denied to them.
func scopedConfig(payGlob string) string {
	return fmt.Sprintf(`
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
holdoff: {min: 10ms, max: 50ms}
sources:
  - {name: static, type: file, path: services.yaml}
scopes:
  default: all
  rules:
    - name: payments
      node: {id: "pay-*"}
      services: [{services: [%q]}]
      deny: [{services: [payroll]}]
`, payGlob)
}

// TestScopes: a node of a scope holds its scope's clusters and one of no
// scope every cluster; /clients, /debug/why and bridge dump say so; a
// reload narrowing the scope removes the cluster it dropped.
func TestScopes(t *testing.T) {
	dir := t.TempDir()
	services := "services:\n"
	for i, name := range []string{"pay-a", "pay-b", "payroll", "web"} {
		services += fmt.Sprintf("  - {name: %s, endpoints: [{address: 10.0.0.%d, port: 80}]}\n", name, i+1)
	}
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(services), 0o600); err != nil {
		t.Fatal(err)
	}
	in := bridgetest.StartIn(t, dir, scopedConfig("pay*"), io.Discard)
	admin := "http://" + in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)
	ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Patience)
	defer cancel()

	holds := func(c *envoysim.Client, want ...string) {
		t.Helper()
		if err := c.WaitFor(ctx, func(s envoysim.State) bool {
			return slices.Equal(slices.Sorted(maps.Keys(s.Clusters)), want)
		}); err != nil {
			t.Fatalf("never held exactly the clusters %v: %v", want, err)
		}
	}
	pay, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String(), Node: "pay-1", Delta: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pay.Close()
	other, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String(), Node: "web-1", Delta: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holds(pay, "pay-a", "pay-b")
	holds(other, "pay-a", "pay-b", "payroll", "web")

	var clients []xds.ClientStatus
	getJSON(t, admin+"/clients", &clients)
	scopes := map[string]string{}
	for _, c := range clients {
		scopes[c.ID] = c.Scope
	}
	if scopes["pay-1"] != "payments" || scopes["web-1"] != "" {
		t.Errorf("/clients shows scopes %v; want pay-1 in payments and web-1 in none", scopes)
	}

	for _, tc := range []struct {
		cluster  string
		verdict  string
		selector string
	}{
		{"pay-a", "delivered", "scopes.rules[0].services[0]"},
		{"web", "named only", ""},
		{"payroll", "denied", "scopes.rules[0].deny[0]"},
	} {
		var why bridge.Why
		getJSON(t, admin+"/debug/why?cluster="+tc.cluster+"&node=pay-1", &why)
		if s := why.Scope; s == nil || !s.Connected || s.Scope != "payments" || s.Rule != "scopes.rules[0]" ||
			string(s.Verdict) != tc.verdict || s.Selector != tc.selector {
			t.Errorf("/debug/why for %s and pay-1: %+v; want scope payments by scopes.rules[0], %s by %q", tc.cluster, s, tc.verdict, tc.selector)
		}
	}

	// bridge dump's path applies the scope of the node given.
	path := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(path, []byte(scopedConfig("pay*")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := bridge.Snapshot(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d, err := bridge.ForNode(rs, bridge.Client("pay-2", "", false), cfg.ScopeRules, xds.ClusterType)
	if err != nil {
		t.Fatal(err)
	}
	var dumped []string
	for _, r := range d[xds.ClusterType] {
		dumped = append(dumped, r.Name)
	}
	if !slices.Equal(dumped, []string{"pay-a", "pay-b"}) {
		t.Errorf("bridge dump --node-id pay-2 shows clusters %v; want pay-a and pay-b", dumped)
	}

	// A reload narrowing the scope removes the cluster it dropped.
	if _, err := in.Reload(ctx, func() (*config.Config, error) {
		if err := os.WriteFile(path, []byte(scopedConfig("pay-a")), 0o600); err != nil {
			t.Fatal(err)
		}
		return config.Load(path, nil)
	}); err != nil {
		t.Fatal(err)
	}
	holds(pay, "pay-a")
	holds(other, "pay-a", "pay-b", "payroll", "web")
}
