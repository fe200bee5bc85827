package file

import "time"

// gate decides when the services file may be read. A file renamed into
// place is whole the moment its name appears; one written in place is
// whole only once its writer is done. On Linux the kernel says when that
// is (the writer closed the file: IN_CLOSE_WRITE), and the gate waits for
// it however long the writer pauses. Where nothing says so (no watch,
// another platform, a network file system), the gate waits instead for the
// file to have been unmodified for settle, which a writer pausing longer
// than settle defeats.
type gate struct {
	// closeWrite: the watch reports writers closing the file.
	closeWrite bool
	// open (closeWrite only): the file was written in place and its
	// writer has not closed it yet. Nothing reads the file meanwhile, not
	// even the poll.
	open bool
	// inPlace: the next read waits for the file to have been unmodified
	// for settle. It is set where a write may be under way unseen: when
	// the source starts, after a watch lost changes or went away, on
	// every write where closes are not reported, and when the poll finds
	// the file changed in place with no change seen (a write through a
	// hard link elsewhere, or one whose change is still on its way).
	inPlace bool
}

// see records a change of the watched directory and reports whether it
// calls for a read, which the caller arms after its debounce.
func (g *gate) see(c change, path string) bool {
	switch {
	case c.kind == overflow || c.kind == lost:
		// The changes lost may be a write, or the close that ended one:
		// the next read waits for settle, as where closes are unknown.
		g.open, g.inPlace = false, true
		return true
	case c.kind == failed:
		return false
	case c.name != path:
		// Another name of the directory: a rename or a symlink swap may
		// have put new content under the file's name. A write to another
		// file changes nothing until it is closed or renamed.
		return !g.closeWrite || c.kind != written
	case c.kind == written:
		if g.closeWrite {
			g.open = true
			return false // the close brings the read
		}
		g.inPlace = true
		return true
	case c.kind == closed:
		g.open, g.inPlace = false, false
		return true
	case c.kind == replaced:
		// Another file under the name: one renamed into place is whole;
		// one being created is written next, and its writes say so.
		g.open, g.inPlace = false, false
		return true
	}
	return true
}

// quiet returns how long the file must have been unmodified before it is
// read. With closes reported it is the debounce: a write of the last
// moment may have a change still on its way to the source, which the wait
// lets arrive (and make the file open).
func (g *gate) quiet(debounce, settle time.Duration) time.Duration {
	switch {
	case g.inPlace:
		return settle
	case g.closeWrite:
		return debounce
	}
	return 0
}
