package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/zktest"
)

// TestDumpZookeeper runs `bridge dump` on a configuration with a ZooKeeper
// source against a real ZooKeeper: it reads the tree once and prints the
// cluster's assignment.
func TestDumpZookeeper(t *testing.T) {
	srv := zktest.Start(t)
	r := zktest.NewRegistrar(t, srv.Addr, 10*time.Second)
	r.Curator("/services", "greeter", "id-0", "10.0.0.7", 50051)
	path := filepath.Join(t.TempDir(), "bridge.yaml")
	cfg := fmt.Sprintf("sources: [{name: zk, type: zookeeper, servers: [%q], services: [{path: /services, format: curator}]}]\n", srv.Addr)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runBridge("dump", path, "--type", "eds", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"cluster_name": "greeter"`, `"address": "10.0.0.7"`, `"port_value": 50051`} {
		if !strings.Contains(out, want) {
			t.Errorf("dump lacks %s:\n%s", want, out)
		}
	}
}
