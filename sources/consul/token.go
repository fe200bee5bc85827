package consul

import (
	"fmt"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/filestamp"
)

// tokenCheckInterval is how often token_file is read again. Vault Agent and
// consul-template rotate tokens by replacing the file; reading a file of a
// few dozen bytes twice a second costs nothing and needs no file watch
// (which misses renames onto a watched path on some systems).
const tokenCheckInterval = 500 * time.Millisecond

// token holds the ACL token sent with every request: the token key, or the
// content of token_file, re-read when it changes and after a 403.
type token struct {
	file string

	mu  sync.Mutex
	cur string
}

// newToken holds value, or the content of file when file is set.
func newToken(value, file string) *token {
	return &token{file: file, cur: value}
}

func (t *token) get() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// reload reads token_file again and reports whether the token changed. An
// unreadable or empty file keeps the current token: a rotation that
// replaces the file is not a revocation, and the next read will see the
// new content.
func (t *token) reload() (changed bool, err error) {
	if t.file == "" {
		return false, nil
	}
	v, err := filestamp.ReadToken(t.file)
	if err != nil {
		return false, fmt.Errorf("reading token_file: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed = v != t.cur
	t.cur = v
	return changed, nil
}
