// Package golden compares test output with golden files. A test package
// that uses it takes the -update flag, which rewrites the files from the
// current output instead of comparing (go test ./translate -update), to be
// reviewed as a diff.
package golden

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// Check fails t unless got equals the content of the file at path; with
// -update it writes got to path instead.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (go test -update in its package creates it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output; run go test -update in its package and review the diff.\ngot:\n%s", path, got)
	}
}
