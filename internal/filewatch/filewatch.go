// Package filewatch tells a caller when some of a few files may have
// changed: certificates rotated in place, by rename or by a Kubernetes
// volume's symlink swap, and configuration files edited. It watches the
// files' directories (fsnotify) and confirms each change by the files'
// stamps (internal/filestamp), so that events on other files of a
// directory cost a stat per file and nothing more; a poll on the same
// stamps catches what no event reports (network file systems, a
// directory created after the watch began).
package filewatch

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/xdsbridge/xdsbridge/internal/filestamp"
)

// Options configure Run.
type Options struct {
	// Paths are the files watched.
	Paths []string
	// Poll is the interval of the stamp comparison that needs no event;
	// default DefaultPoll.
	Poll time.Duration
	// Settle is how long after an event the stamps are compared, so that
	// a rotation writing a certificate and then its key is seen as one
	// change; default DefaultSettle.
	Settle time.Duration
}

// Defaults of Options.
const (
	DefaultPoll   = 5 * time.Second
	DefaultSettle = 100 * time.Millisecond
)

// Run calls changed each time the stamps of the files differ from those
// of the previous call (or of the start), until ctx ends. A file that
// cannot be stat'ed has a stamp too (the error), so a file that appears
// or vanishes is a change. changed runs on Run's goroutine.
func Run(ctx context.Context, opts Options, changed func()) {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	last := stamps(opts.Paths)
	var events <-chan fsnotify.Event
	if w, err := fsnotify.NewWatcher(); err == nil {
		defer w.Close()
		var dirs []string
		for _, p := range opts.Paths {
			dirs = append(dirs, filepath.Dir(p))
		}
		slices.Sort(dirs)
		for _, d := range slices.Compact(dirs) {
			_ = w.Add(d) // a directory that cannot be watched is polled
		}
		events = w.Events
		go drainErrors(ctx, w.Errors)
	}
	poll := time.NewTicker(opts.Poll)
	defer poll.Stop()
	settle := time.NewTimer(0)
	if !settle.Stop() {
		<-settle.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			settle.Reset(opts.Settle)
			continue
		case <-settle.C:
		case <-poll.C:
		}
		if now := stamps(opts.Paths); !same(now, last) {
			last = now
			changed()
		}
	}
}

// drainErrors discards the watcher's errors (an overflowed queue, say):
// the poll covers what the events missed.
func drainErrors(ctx context.Context, errs <-chan error) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-errs:
			if !ok {
				return
			}
		}
	}
}

// stamp is a file's stamp, or why it has none.
type stamp struct {
	s   []filestamp.Stamp
	err string
}

func stamps(paths []string) []stamp {
	out := make([]stamp, len(paths))
	for i, p := range paths {
		s, err := filestamp.Of(p)
		if err != nil {
			out[i].err = err.Error()
			continue
		}
		out[i].s = s
	}
	return out
}

func same(a, b []stamp) bool {
	return slices.EqualFunc(a, b, func(x, y stamp) bool { return x.err == y.err && filestamp.Equal(x.s, y.s) })
}
