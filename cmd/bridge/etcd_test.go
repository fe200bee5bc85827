package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/test/etcdtest"
)

// TestDumpEtcd runs `bridge dump` on a configuration with an etcd source
// against a real etcd: it reads the prefix once and prints the cluster's
// assignment.
func TestDumpEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	reg := etcdtest.Registrar{C: srv.Client(t)}
	if err := reg.GRPC(t.Context(), "services/greeter", "10.0.0.7:50051", nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bridge.yaml")
	cfg := fmt.Sprintf("sources: [{name: etcd, type: etcd, endpoints: [%q], services: [{prefix: services/, format: grpc-naming}]}]\n", srv.ClientURL)
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
