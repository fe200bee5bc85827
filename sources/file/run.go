package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/sources"
)

// reader is what one Run remembers between reads.
type reader struct {
	published bool
	last      []byte // content last published
	spare     []byte // a buffer no longer referenced, for the next read
	fails     *sources.FailureLog
	items     itemCache   // the last content's services item by item, for edits
	stamp     os.FileInfo // the file as the last read found it
	waiting   bool        // the note that a writer keeps the file open is set
}

// noteWriter is the key of the status note about a writer that keeps the
// file open.
const noteWriter = "writer"

// Run reads the file, sends its services, and re-reads it on watch events
// and every poll interval until ctx is done.
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir := filepath.Dir(s.path)
	w, err := newWatcher(ctx, dir)
	var changes <-chan change
	if err != nil {
		s.log.Warn("cannot watch the services file; polling only", "err", err, "poll_interval", s.poll)
	} else {
		// The watch's goroutine may be waiting to hand over a change that
		// nothing reads any more: the context ends that wait first.
		defer func() {
			cancel()
			w.close()
		}()
		changes = w.changes()
	}
	// A writer may be at work as the source starts, and nothing has told
	// yet: the first read waits for the file to be quiet.
	g := gate{inPlace: true}
	watching := false
	var watchErr string
	watch := func() {
		if w == nil || watching {
			return
		}
		if err := w.add(); err != nil {
			if err.Error() != watchErr {
				s.log.Warn("cannot watch the directory of the services file; polling", "dir", dir, "err", err)
				watchErr = err.Error()
			}
			return
		}
		watching, watchErr = true, ""
		g.closeWrite = s.closeWrite && w.closes()
	}

	// A file's error changes only when the file does, so each new one is
	// logged; the same one again at most once a minute.
	r := reader{fails: &sources.FailureLog{Log: s.log, Level: slog.LevelError, NewErrors: true,
		FailingMsg: "rejecting services file; keeping the last good services", RecoveredMsg: "services file is valid again"}}
	timer := time.NewTimer(s.debounce)
	timer.Stop()
	defer timer.Stop()
	pending := false // timer is armed
	wait := func(d time.Duration) {
		timer.Reset(d)
		pending = true
	}
	see := func(c change) {
		switch c.kind {
		case lost:
			watching, g.closeWrite = false, false // the watch went with the directory
		case overflow:
			s.log.Warn("the watch of the services file lost changes; the next read waits for settle", "dir", dir)
		case failed:
			s.log.Warn("watching the services file", "err", c.err)
		}
		if g.see(c, s.path) {
			wait(s.debounce)
		}
	}
	// drain takes the changes already on their way, so that a read
	// decided now knows of every write the watch has reported.
	drain := func() {
		for {
			select {
			case c, ok := <-changes:
				if !ok {
					changes = nil
					return
				}
				see(c)
			default:
				return
			}
		}
	}
	reload := func() bool {
		u, ok, young, changing := s.load(&r, g.quiet(s.debounce, s.settle))
		switch {
		case young > 0:
			wait(young)
			return true
		case changing:
			g.inPlace = true
			wait(s.settle)
			return true
		}
		g.inPlace = false
		s.waitingFor(&r, false)
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
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			see(c)
		case <-timer.C:
			pending = false
			if drain(); pending || g.open {
				continue // a change re-armed the timer, or a writer's close brings the read
			}
			if !reload() {
				return ctx.Err()
			}
		case <-poll.C:
			watch()
			if drain(); pending {
				continue
			}
			switch {
			case g.open:
				s.waitingFor(&r, true)
				continue
			case !g.closeWrite || r.changedInPlace(s.path):
				// Nothing says whether a writer is done with the file:
				// it is read once it has been quiet for settle.
				g.inPlace = true
			}
			if !reload() {
				return ctx.Err()
			}
		}
	}
}

// waitingFor sets (or clears) the status note, and logs once, that the
// file was written in place and its writer has kept it open for longer
// than settle: its content waits for the close.
func (s *Source) waitingFor(r *reader, open bool) {
	if open && !r.waiting {
		if age, err := s.age(); err != nil || age < s.settle {
			return
		}
		msg := fmt.Sprintf("%s was written in place and its writer has not closed it; the last good content stays served until it does", s.name)
		s.log.Warn("waiting for the writer of the services file to close it", "file", s.name)
		s.status.Note(noteWriter, msg)
		r.waiting = true
	} else if !open && r.waiting {
		s.status.Note(noteWriter, "")
		r.waiting = false
	}
}

// changedInPlace reports whether the file is the one the last read found,
// modified since.
func (r *reader) changedInPlace(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && r.stamp != nil && os.SameFile(fi, r.stamp) &&
		(fi.Size() != r.stamp.Size() || !fi.ModTime().Equal(r.stamp.ModTime()))
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
// young reports a file modified less than quiet ago, which is not read
// until it has been quiet that long; changing, a file modified while it was
// read: nothing is decided on such a read.
func (s *Source) load(r *reader, quiet time.Duration) (u sources.Update, ok bool, young time.Duration, changing bool) {
	data, stamp, young, changing, err := s.read(r.spare, quiet)
	if young > 0 {
		return sources.Update{}, false, young, false
	}
	if stamp != nil {
		r.stamp = stamp
	}
	// Whatever happens next, one of data and r.last is free for the next
	// read: reading a large file into a fresh buffer costs more in page
	// faults and zeroing than the read itself.
	r.spare = data
	if err != nil {
		s.fail(r, err)
		return sources.Update{}, false, 0, false
	}
	if changing {
		return sources.Update{}, false, 0, true
	}
	// The last content is kept rather than a hash of it: the item cache
	// holds its text anyway, and a comparison of bytes costs less than
	// hashing them (a SHA-256 of a 100 MB file is a few hundred ms). When
	// the item cache holds the last content, its own comparison (the
	// bytes both files share at their start and end) finds an unchanged
	// file too, and a second pass over the file here would double it.
	same := r.published && !r.items.holds() && bytes.Equal(data, r.last)
	if !same {
		r.items.schema = s.schema
		var dropped Dropped
		if u, dropped, err = r.items.parse(data, s.json); err != nil {
			s.fail(r, fmt.Errorf("%s: %w", s.name, err))
			return sources.Update{}, false, 0, false
		}
		dropped.Record(s.status, s.log, s.name)
	}
	s.status.Succeeded()
	r.fails.Recovered("file", s.name)
	if same {
		return sources.Update{}, false, 0, false
	}
	r.published, r.last, r.spare = true, data, reclaim.Buffer(r.last, len(data))
	if !u.Full && len(u.Services) == 0 && len(u.Removed) == 0 {
		return sources.Update{}, false, 0, false // only comments or blank lines changed
	}
	s.log.Debug("services file loaded", "file", s.name, "full", u.Full, "services", len(u.Services), "removed", len(u.Removed))
	return u, true, 0, false
}

// read returns the file's content, at most s.maxBytes of it, read into buf
// when it is large enough, the file's stat as the read began, and whether
// its size or modification time changed while it was read. A file
// modified less than quiet ago is not read: young says how long until it
// will have been quiet that long. The age is the open file's, taken before
// its first byte is read, so that a write between a caller's decision to
// read and the read itself still counts: a write before that stat makes
// the file young, one after it makes it changing.
func (s *Source) read(buf []byte, quiet time.Duration) (data []byte, before os.FileInfo, young time.Duration, changing bool, err error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, nil, 0, false, fmt.Errorf("reading services file: %w", err)
	}
	defer f.Close()
	before, err = f.Stat()
	if err != nil {
		return nil, nil, 0, false, fmt.Errorf("reading services file: %w", err)
	}
	if age := time.Since(before.ModTime()); age < quiet {
		return nil, before, quiet - age, false, nil
	}
	size := before.Size()
	if size > s.maxBytes {
		return nil, before, 0, false, fmt.Errorf("%s: %d bytes, more than max_bytes (%d)", s.name, size, s.maxBytes)
	}
	// One byte more than the file had, to see it grow. A new buffer has
	// room for the file to grow a little, so that an edit that adds a few
	// bytes does not cost a new buffer of the whole file; a buffer much
	// larger than the file (it held a larger one) is left to the collector.
	if buf = reclaim.Buffer(buf, int(size+1)); buf == nil {
		buf = make([]byte, size+1, size+1+size/32+4096)
	}
	n, err := io.ReadFull(f, buf[:size+1])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, before, 0, false, fmt.Errorf("reading services file: %w", err)
	}
	data = buf[:n]
	after, err := os.Stat(s.path)
	changing = err != nil || after.Size() != size || !after.ModTime().Equal(before.ModTime()) || int64(n) != size
	return data, before, 0, changing, nil
}

func (s *Source) fail(r *reader, err error) {
	s.status.Failed(err)
	r.fails.Failed(err, "file", s.name)
}
