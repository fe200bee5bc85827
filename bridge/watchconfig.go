package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// How the watch of the configuration file debounces: a reload comes once
// the watched directories have been quiet for watchQuiet after a change,
// and at the latest watchMaxDelay after the first change of a burst, so
// that a file rewritten without pause is still picked up. Half a second
// covers an editor's write-and-rename and the few steps of a ConfigMap
// update, which come within milliseconds.
const (
	watchQuiet    = 500 * time.Millisecond
	watchMaxDelay = 5 * time.Second
)

// configWatch reloads the configuration when its file changes
// (reload.watch_config). It watches the directory of the file's path and
// the directory of the file the path resolves to through symbolic links:
// the first sees a Kubernetes ConfigMap volume swap its ..data link to a
// new directory and an editor rename a file into place; the second sees a
// write in place to a file that the path only links to. Each burst of
// changes ends in one look at the file: when its content differs from the
// last content seen (the running configuration's at first), a reload is
// requested, which applies it or rejects it as SIGHUP would. Changes of
// other files in the same directories (a services file beside the
// configuration) cost a read of the configuration file and nothing more.
type configWatch struct {
	path    string
	seen    string // the content last seen: its digest, or why it could not be read
	reload  func(ctx context.Context) error
	log     *slog.Logger
	watched map[string]bool
	failing bool // the watch reported an error, logged once until it recovers
}

func newConfigWatch(path string, digest [sha256.Size]byte, reload func(ctx context.Context) error, log *slog.Logger) *configWatch {
	return &configWatch{path: path, seen: hex.EncodeToString(digest[:]), reload: reload,
		log: log.With("file", path), watched: map[string]bool{}}
}

// run watches until ctx is done.
func (w *configWatch) run(ctx context.Context) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		w.log.Error("cannot watch the configuration file; reload it with SIGHUP or POST /-/reload", "err", err)
		return
	}
	defer fw.Close()
	w.follow(fw)
	w.log.Info("watching the configuration file; a change is reloaded")
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	defer quiet.Stop()
	var first time.Time // of the burst being debounced; zero when none
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-fw.Events:
			if !ok {
				return
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			// An overflow of the kernel's queue loses events: the look at
			// the file that follows catches up with whatever they were.
			if !w.failing {
				w.log.Warn("the watch of the configuration file reported an error; looking at the file", "err", err)
			}
			w.failing = true
		case <-quiet.C:
			first = time.Time{}
			w.look(ctx)
			w.follow(fw)
			continue
		}
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		quiet.Reset(min(watchQuiet, first.Add(watchMaxDelay).Sub(now)))
	}
}

// look reads the file and requests a reload when its content changed.
func (w *configWatch) look(ctx context.Context) {
	seen := ""
	data, err := os.ReadFile(w.path)
	if err != nil {
		// A file that cannot be read is a change too: the reload rejects
		// it, logged and counted, once per such state.
		seen = "unreadable: " + err.Error()
	} else {
		sum := sha256.Sum256(data)
		seen = hex.EncodeToString(sum[:])
	}
	if seen == w.seen {
		return
	}
	w.seen = seen
	w.log.Info("the configuration file changed; reloading it")
	// The reload logs and counts its outcome itself.
	_ = w.reload(ctx)
}

// follow watches the directory of the path and the directory of the file
// it resolves to now, and stops watching one the file no longer resolves
// to (a ConfigMap's previous data directory, which is deleted anyway).
func (w *configWatch) follow(fw *fsnotify.Watcher) {
	want := map[string]bool{filepath.Dir(w.path): true}
	if resolved, err := filepath.EvalSymlinks(w.path); err == nil {
		want[filepath.Dir(resolved)] = true
	}
	for dir := range w.watched {
		if !want[dir] {
			_ = fw.Remove(dir) // gone already, most often
			delete(w.watched, dir)
		}
	}
	for dir := range want {
		if w.watched[dir] {
			continue
		}
		if err := fw.Add(dir); err != nil {
			w.log.Warn("cannot watch a directory of the configuration file", "dir", dir, "err", err)
			continue
		}
		w.watched[dir] = true
	}
	if w.failing && len(w.watched) > 0 {
		w.log.Info("watching the configuration file again")
		w.failing = false
	}
}
