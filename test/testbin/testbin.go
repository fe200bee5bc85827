// Package testbin finds the real servers that integration tests and
// benchmarks run (Consul, CoreDNS, etcd), the way scripts/tools.sh leaves
// them: the path in an environment variable, else the command on PATH,
// else the binary that script built into its cache. Without one the test
// is skipped, or fails when XDSBRIDGE_INTEGRATION=required (make test).
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Find returns the path of the server binary called name at version: the
// file $env names, else name on PATH, else
// ${XDSBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xdsbridge}/bin/name-version.
// When there is none it skips the test (fails it under
// XDSBRIDGE_INTEGRATION=required) and returns "".
func Find(t testing.TB, env, name, version string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		Missing(t, env+"="+p+" does not exist")
		return ""
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := Cached(name, version); p != "" {
		return p
	}
	Missing(t, "no "+name+" binary (set "+env+", put "+name+" on PATH, or run scripts/tools.sh)")
	return ""
}

// Cached returns the path of name-version in the cache scripts/tools.sh
// fills, or "" when it is not there.
func Cached(name, version string) string {
	cache := os.Getenv("XDSBRIDGE_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(base, "xdsbridge")
	}
	p := filepath.Join(cache, "bin", name+"-"+version)
	if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

// Missing skips the test for why, or fails it when
// XDSBRIDGE_INTEGRATION=required.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("XDSBRIDGE_INTEGRATION") == "required" {
		t.Fatal(why)
	}
	t.Skip(why)
}
