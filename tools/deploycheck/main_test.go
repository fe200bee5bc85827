package deploycheck

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The repository's root and the bridge built from it once by TestMain.
var (
	repoRoot  string
	bridgeBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "deploycheck")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bridgeBin, err = BuildBridge(root, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// deployPath is a path under the repository's deploy/ folder.
func deployPath(elem ...string) string {
	return filepath.Join(append([]string{repoRoot, "deploy"}, elem...)...)
}

// readDeploy reads a file under deploy/.
func readDeploy(t *testing.T, elem ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(deployPath(elem...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// listenPort is the port of a host:port listen address.
func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return n
}

// testHostIP is the node address the checks hand to the downward API and
// to Nomad's node attributes (a documentation address: nothing is ever
// sent to it, `bridge validate` contacts no registry).
const testHostIP = "192.0.2.10"
