// Package filestamp tells whether files changed since they were last read,
// cheaply enough to ask on every TLS handshake or request: a stat per file,
// no read. Certificates and tokens rotated on disk are picked up this way
// without a restart and without a watcher goroutine.
package filestamp

import (
	"errors"
	"os"
	"strings"
	"time"
)

// Stamp identifies one version of a file: its identity (device and inode,
// which a rename-into-place changes), size and modification time (which an
// in-place write changes, at the file system's clock granularity).
type Stamp struct {
	info os.FileInfo
	size int64
	mod  time.Time
}

// Of returns the stamp of each of paths; an empty path has the zero stamp.
// A file that cannot be stat'ed makes an error.
func Of(paths ...string) ([]Stamp, error) {
	out := make([]Stamp, len(paths))
	for i, p := range paths {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = Stamp{info: st, size: st.Size(), mod: st.ModTime()}
	}
	return out, nil
}

// Equal reports whether two lists of stamps are the same.
func Equal(a, b []Stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i].info == nil) != (b[i].info == nil) || a[i].size != b[i].size || !a[i].mod.Equal(b[i].mod) ||
			(a[i].info != nil && !os.SameFile(a[i].info, b[i].info)) {
			return false
		}
	}
	return true
}

// Cache holds a value parsed from files and reparses it when a stamp
// changes. It is not safe for concurrent use; callers hold their own lock.
type Cache[T any] struct {
	Paths []string
	// Parse reads the files and builds the value.
	Parse func() (T, error)
	// Loads counts the successful parses, so that a caller can tell a
	// reload from a cached answer.
	Loads  int
	stamps []Stamp
	value  T
	loaded bool
	// failed is what the files were when a parse last failed, and
	// lastErr why: files that have not changed since are not parsed
	// again, so that a broken pair costs a handshake a stat per file, as a
	// good one does, rather than a parse.
	failed  []Stamp
	lastErr error
}

// Get returns the value, reparsed if a file changed. When a reparse
// fails, it returns the last good value together with the error, so the
// caller keeps serving and reports; it fails outright only before the
// first good parse. Files that failed to parse are parsed again only once
// one of them changes; until then Get returns that failure's error.
func (c *Cache[T]) Get() (T, error) {
	stamps, err := Of(c.Paths...)
	switch {
	case err != nil:
		return c.value, err
	case c.loaded && Equal(stamps, c.stamps):
		return c.value, nil
	case c.failed != nil && Equal(stamps, c.failed):
		return c.value, c.lastErr
	}
	v, err := c.Parse()
	if err != nil {
		c.failed, c.lastErr = stamps, err
		return c.value, err
	}
	c.value, c.stamps, c.loaded, c.failed, c.lastErr = v, stamps, true, nil, nil
	c.Loads++
	return v, nil
}

// ReadToken reads a secret kept in a file (an ACL or bearer token, as Vault
// Agent or consul-template write them): the content without surrounding
// white space. A file holding nothing else is an error, never an empty
// token that would silently send requests unauthenticated.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New(path + " is empty")
	}
	return tok, nil
}
