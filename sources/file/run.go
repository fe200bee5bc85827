package file

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/xdsbridge/xdsbridge/sources"
)

// reader is what one Run remembers between reads.
type reader struct {
	published bool
	last      []byte    // content last published
	spare     []byte    // a buffer no longer referenced, for the next read
	logged    string    // last error logged, to log each once
	items     itemCache // the last content's services item by item, for edits
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
	settle := time.NewTimer(s.debounce)
	settle.Stop()
	defer settle.Stop()
	var (
		pending bool // settle is armed
		inPlace bool // the file was written in place since the last read
	)
	wait := func(d time.Duration) {
		settle.Reset(d)
		pending = true
	}
	// reload reads the file unless it is still being written: quiet asks
	// for it to be unmodified for s.settle first.
	reload := func(quiet bool) bool {
		if quiet {
			if age, err := s.age(); err == nil && age < s.settle {
				wait(s.settle - age)
				return true
			}
		}
		u, ok, changing := s.load(&r)
		if changing {
			inPlace = true
			wait(s.settle)
			return true
		}
		inPlace = false
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
	if !reload(false) {
		return ctx.Err()
	}
	poll := time.NewTicker(s.poll)
	defer poll.Stop()
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
			if filepath.Clean(ev.Name) == s.path && ev.Has(fsnotify.Write) {
				inPlace = true
			}
			wait(s.debounce)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			s.log.Warn("watching the services file", "err", err)
		case <-settle.C:
			pending = false
			if !reload(inPlace) {
				return ctx.Err()
			}
		case <-poll.C:
			watch()
			// A poll never reads a file that a write may still be
			// changing: it leaves it to the settle timer when armed, and
			// otherwise to one the file's age arms.
			if !pending && !reload(true) {
				return ctx.Err()
			}
		}
	}
}

// age returns how long ago the file was last modified.
func (s *Source) age() (time.Duration, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, err
	}
	return time.Since(fi.ModTime()), nil
}

// load reads and parses the file. It returns the update to send when the
// file is valid and differs from what was last published (Full the first
// time, then only what changed where the item cache could tell); a bad file is
// recorded as a failure and sends nothing, so the last good state stays.
// changing reports a file modified while it was read: nothing is decided
// on such a read.
func (s *Source) load(r *reader) (u sources.Update, ok, changing bool) {
	data, changing, err := s.read(r.spare)
	// Whatever happens next, one of data and r.last is free for the next
	// read: reading a large file into a fresh buffer costs more in page
	// faults and zeroing than the read itself.
	r.spare = data
	if err != nil {
		s.fail(r, err)
		return sources.Update{}, false, false
	}
	if changing {
		return sources.Update{}, false, true
	}
	// The last content is kept rather than a hash of it: the item cache
	// holds its text anyway, and a comparison of bytes costs less than
	// hashing them (a SHA-256 of a 100 MB file is a few hundred ms). When
	// the item cache holds the last content, its own comparison (the
	// bytes both files share at their start and end) finds an unchanged
	// file too, and a second pass over the file here would double it.
	same := r.published && !r.items.holds() && bytes.Equal(data, r.last)
	if !same {
		if u, err = r.items.parse(data, s.json); err != nil {
			s.fail(r, fmt.Errorf("%s: %w", s.name, err))
			return sources.Update{}, false, false
		}
	}
	s.status.Succeeded()
	if r.logged != "" {
		s.log.Info("services file is valid again", "file", s.name)
		r.logged = ""
	}
	if same {
		return sources.Update{}, false, false
	}
	r.published, r.last, r.spare = true, data, r.last
	if !u.Full && len(u.Services) == 0 && len(u.Removed) == 0 {
		return sources.Update{}, false, false // only comments or blank lines changed
	}
	s.log.Debug("services file loaded", "file", s.name, "full", u.Full, "services", len(u.Services), "removed", len(u.Removed))
	return u, true, false
}

// read returns the file's content, at most s.maxBytes of it, read into buf
// when it is large enough, and whether its size or modification time
// changed while it was read.
func (s *Source) read(buf []byte) (data []byte, changing bool, err error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, false, fmt.Errorf("reading services file: %w", err)
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("reading services file: %w", err)
	}
	size := before.Size()
	if size > s.maxBytes {
		return nil, false, fmt.Errorf("%s: %d bytes, more than max_bytes (%d)", s.name, size, s.maxBytes)
	}
	// One byte more than the file had, to see it grow. A new buffer has
	// room for the file to grow a little, so that an edit that adds a few
	// bytes does not cost a new buffer of the whole file.
	if int64(cap(buf)) < size+1 {
		buf = make([]byte, size+1, size+1+size/32+4096)
	}
	n, err := io.ReadFull(f, buf[:size+1])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, false, fmt.Errorf("reading services file: %w", err)
	}
	data = buf[:n]
	after, err := os.Stat(s.path)
	changing = err != nil || after.Size() != size || !after.ModTime().Equal(before.ModTime()) || int64(n) != size
	return data, changing, nil
}

func (s *Source) fail(r *reader, err error) {
	s.status.Failed(err)
	if msg := err.Error(); msg != r.logged {
		s.log.Error("rejecting services file; keeping the last good services", "file", s.name, "err", err)
		r.logged = msg
	}
}
