package sources

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Checker is implemented by sources whose settings name things outside the
// configuration that can be checked without contacting a registry: files
// that must be readable, URLs that must parse. `bridge validate` calls
// Check; the bridge itself does not (a source finds out at run time and
// reports through its Status).
type Checker interface {
	// Check returns what is wrong, with keys relative to the source's
	// entry (such as "token_file"); nil when all is well.
	Check() []Problem
}

// Problem is what a check found wrong with one key.
type Problem struct {
	Key string
	Err error
	// Origin is where the value came from, as in settings.KeyError: a source sets
	// it for a value it took from the environment; the configuration
	// loader fills in the file's name for the others.
	Origin string
	// Warning marks a problem the running bridge copes with, such as a
	// file that may legitimately appear later; the others keep it from
	// ever working as configured.
	Warning bool
}

// String words the problem in one line: `error: bridge.yaml:
// sources[0].token_file: file /x does not exist`, the origin and the key
// left out when empty.
func (p Problem) String() string {
	parts := []string{"error"}
	if p.Warning {
		parts[0] = "warning"
	}
	for _, s := range []string{p.Origin, p.Key} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(append(parts, p.Err.Error()), ": ")
}

// Readable checks that path names a readable regular file.
func Readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file %s does not exist", path)
		}
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	var b [1]byte
	if _, err := f.Read(b[:]); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}
