package filestamp

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestCacheParsesEachVersionOnce: a file is parsed once per version,
// whether the parse succeeds or fails; a failed version keeps the last
// good value and its error until the file changes.
func TestCacheParsesEachVersionOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		t.Helper()
		// A new file each time (a rename into place, as rotations do):
		// its identity changes even within the clock's granularity.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	parses := 0
	c := Cache[string]{Paths: []string{path}, Parse: func() (string, error) {
		parses++
		b, err := os.ReadFile(path)
		if string(b) == "bad" {
			return "", errors.New("bad content")
		}
		return string(b), err
	}}
	write("one")
	for range 3 {
		if v, err := c.Get(); v != "one" || err != nil {
			t.Fatalf("Get = %q, %v", v, err)
		}
	}
	write("bad")
	for range 3 {
		if v, err := c.Get(); v != "one" || err == nil {
			t.Fatalf("Get of a bad version = %q, %v; want the last good value and an error", v, err)
		}
	}
	write("two")
	if v, err := c.Get(); v != "two" || err != nil {
		t.Fatalf("Get after a fix = %q, %v", v, err)
	}
	if parses != 3 {
		t.Fatalf("%d parses for 3 versions read 7 times, want 3", parses)
	}
	if c.Loads != 2 {
		t.Fatalf("Loads = %d, want 2", c.Loads)
	}
}
