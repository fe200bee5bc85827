package file

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/xdsbridge/xdsbridge/sources"
)

// reader is what one Run remembers between reads.
type reader struct {
	published bool
	sum       [sha256.Size]byte // content last published
	logged    string            // last error logged, to log each once
	items     itemCache         // parsed services by item text, for edits
}

// Run reads the file, sends its services, and re-reads it on watch events
// and every poll interval until ctx is done.
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	dir := filepath.Dir(s.path)
	w, err := fsnotify.NewWatcher()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if err != nil {
		s.log.Warn("cannot watch the services file; polling only", "err", err, "poll_interval", s.poll)
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	watching := false
	var watchErr string
	watch := func() {
		if w == nil || watching {
			return
		}
		if err := w.Add(dir); err != nil {
			if err.Error() != watchErr {
				s.log.Warn("cannot watch the directory of the services file; polling", "dir", dir, "err", err)
				watchErr = err.Error()
			}
			return
		}
		watching, watchErr = true, ""
	}

	var r reader
	reload := func() bool {
		u, ok := s.load(&r)
		if !ok {
			return true
		}
		select {
		case up <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}

	watch()
	if !reload() {
		return ctx.Err()
	}
	poll := time.NewTicker(s.poll)
	defer poll.Stop()
	settle := time.NewTimer(s.debounce)
	settle.Stop()
	defer settle.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Any event in the directory may be the file changing: written
			// in place, renamed over, or swapped through a symlink (as
			// Kubernetes does with ConfigMaps). The content hash weeds out
			// the rest.
			if filepath.Clean(ev.Name) == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				watching = false // the watch went with the directory
			}
			settle.Reset(s.debounce)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			s.log.Warn("watching the services file", "err", err)
		case <-settle.C:
			if !reload() {
				return ctx.Err()
			}
		case <-poll.C:
			watch()
			if !reload() {
				return ctx.Err()
			}
		}
	}
}

// load reads and parses the file. It returns the Full update to send when
// the file is valid and differs from what was last published; a bad file is
// recorded as a failure and sends nothing, so the last good state stays.
func (s *Source) load(r *reader) (sources.Update, bool) {
	data, err := os.ReadFile(s.path)
	if err != nil {
		s.fail(r, fmt.Errorf("reading services file: %w", err))
		return sources.Update{}, false
	}
	sum := sha256.Sum256(data)
	var svcs []sources.Service
	if !r.published || sum != r.sum {
		if svcs, err = r.items.parse(data, s.json); err != nil {
			s.fail(r, fmt.Errorf("%s: %w", s.name, err))
			return sources.Update{}, false
		}
	}
	s.status.Succeeded()
	if r.logged != "" {
		s.log.Info("services file is valid again", "file", s.name)
		r.logged = ""
	}
	if r.published && sum == r.sum {
		return sources.Update{}, false
	}
	r.published, r.sum = true, sum
	s.log.Debug("services file loaded", "file", s.name, "services", len(svcs))
	return sources.Update{Full: true, Services: svcs}, true
}

func (s *Source) fail(r *reader, err error) {
	s.status.Failed(err)
	if msg := err.Error(); msg != r.logged {
		s.log.Error("rejecting services file; keeping the last good services", "file", s.name, "err", err)
		r.logged = msg
	}
}
