package e2e

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestMigrationStaticToLDS checks the step from static listeners to the
// bridge (examples/migration/static-to-lds), as docs/migration.md runs
// it: the listeners the bridge serves by LDS (`bridge dump --type lds`)
// are the previous step's static listeners unchanged; its clusters and
// endpoints are the previous step's; and the new bootstrap holds nothing
// but the bridge, taking listeners and clusters over ADS.
func TestMigrationStaticToLDS(t *testing.T) {
	dir := filepath.Join(migration, "static-to-lds")
	config := filepath.Join(dir, "bridge.yaml")
	validate(t, config)
	before := bootstrap(t, filepath.Join(migration, "static-to-eds", "envoy.yaml"))
	after := bootstrap(t, filepath.Join(dir, "envoy.yaml"))

	code, out := runBinaryStdout(t, "dump", "--config", config, "--type", "lds", "--format", "json", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("bridge dump --type lds: exit %d\n%s", code, out)
	}
	listeners, _ := unpackEdge(t, out)
	var want []string
	for _, l := range before.GetStaticResources().GetListeners() {
		want = append(want, l.GetName())
	}
	if served := slices.Sorted(maps.Keys(listeners)); !slices.Equal(served, want) {
		t.Fatalf("the bridge serves listeners %q, the old bootstrap had %q", served, want)
	}
	for _, old := range before.GetStaticResources().GetListeners() {
		if got := listeners[old.GetName()]; !proto.Equal(got, old) {
			t.Errorf("listener %q differs from the old static one:\nold:    %v\nbridge: %v", old.GetName(), old, got)
		}
	}

	prev, now := dump(t, filepath.Join(migration, "static-to-eds", "bridge.yaml")), dump(t, config)
	for name, c := range prev.clusters {
		if !proto.Equal(now.clusters[name], c) || !proto.Equal(now.assignments[name], prev.assignments[name]) {
			t.Errorf("cluster %q or its endpoints differ from the previous step's", name)
		}
	}
	if len(now.clusters) != len(prev.clusters) {
		t.Errorf("%d clusters, the previous step served %d", len(now.clusters), len(prev.clusters))
	}

	dyn, st := after.GetDynamicResources(), after.GetStaticResources()
	if dyn.GetLdsConfig().GetAds() == nil || dyn.GetCdsConfig().GetAds() == nil {
		t.Error("the new bootstrap does not take listeners and clusters over ADS")
	}
	if len(st.GetListeners()) != 0 || len(st.GetClusters()) != 1 {
		t.Errorf("the new bootstrap holds %d static listeners and %d clusters, want none and the bridge's", len(st.GetListeners()), len(st.GetClusters()))
	}
}
