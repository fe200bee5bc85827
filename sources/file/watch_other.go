//go:build !linux

package file

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// portable watches one directory through fsnotify, whose portable events
// say nothing of a writer closing a file: the source then reads a file
// written in place once it has been quiet for settle.
type portable struct {
	w   *fsnotify.Watcher
	dir string
	out chan change
	wg  sync.WaitGroup
}

func newWatcher(ctx context.Context, dir string) (watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("creating a file watcher: %w", err)
	}
	w := &portable{w: fw, dir: dir, out: make(chan change)}
	w.wg.Add(1)
	go w.forward(ctx)
	return w, nil
}

func (w *portable) add() error             { return w.w.Add(w.dir) }
func (w *portable) closes() bool           { return false }
func (w *portable) changes() <-chan change { return w.out }

func (w *portable) close() {
	w.w.Close()
	w.wg.Wait()
}

func (w *portable) forward(ctx context.Context) {
	defer w.wg.Done()
	defer close(w.out)
	for {
		var c change
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			c = change{name: filepath.Clean(ev.Name), kind: touched}
			switch {
			case c.name == w.dir && ev.Has(fsnotify.Remove|fsnotify.Rename):
				c.kind = lost
			case ev.Has(fsnotify.Write):
				c.kind = written
			case ev.Has(fsnotify.Create | fsnotify.Remove | fsnotify.Rename):
				c.kind = replaced
			}
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			c = change{name: w.dir, kind: failed, err: err}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				c.kind = overflow
			}
		}
		select {
		case w.out <- c:
		case <-ctx.Done():
			return
		}
	}
}
