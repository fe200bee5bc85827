package deploycheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// productModule is the module path of the repository this module sits in.
const productModule = "github.com/xdsbridge/xdsbridge"

// RepoRoot returns the directory of the product's go.mod, found by walking
// up from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, l := range strings.Split(string(data), "\n") {
				if strings.TrimSpace(l) == "module "+productModule {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository: no go.mod of " + productModule + " above the working directory")
		}
		dir = parent
	}
}

// BuildBridge builds the bridge command of the repository at root into
// dir and returns the binary's path.
func BuildBridge(root, dir string) (string, error) {
	bin := filepath.Join(dir, "bridge")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/bridge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the bridge: %w\n%s", err, out)
	}
	return bin, nil
}

// Summary is what `bridge validate` reports of a valid configuration.
type Summary struct {
	XDSListen   string
	AdminListen string
	Sources     []string // "name (type)"
	Warnings    []string // the "warning: ..." lines
	Output      string   // everything it printed
}

// Validate runs `bridge validate cfg` with exactly env as its environment,
// so that nothing of the caller's (a BRIDGE_ or CONSUL_ variable) leaks in,
// and returns its summary; a configuration it rejects is an error holding
// its output.
func Validate(bin, cfg string, env []string) (Summary, error) {
	cmd := exec.Command(bin, "validate", cfg)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Summary{Output: string(out)}, fmt.Errorf("bridge validate %s: %w\n%s", cfg, err, out)
	}
	s := Summary{Output: string(out)}
	sc := bufio.NewScanner(bytes.NewReader(out))
	inSources := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 1 && f[0] == "warning:":
			s.Warnings = append(s.Warnings, sc.Text())
		case len(f) >= 2 && f[0] == "xds.listen":
			s.XDSListen, inSources = f[1], false
		case len(f) >= 2 && f[0] == "admin.listen":
			s.AdminListen, inSources = f[1], false
		case len(f) >= 1 && f[0] == "sources":
			inSources = true
		case inSources && len(f) == 3 && f[0] == "-":
			s.Sources = append(s.Sources, f[1]+" "+f[2])
		default:
			inSources = false
		}
	}
	return s, sc.Err()
}
