package file

// watcher reports what happens in the directory of the services file. Its
// implementations are the Linux one (inotify, which also says when a writer
// closes a file) and, elsewhere, one over fsnotify's portable events.
type watcher interface {
	// add watches the directory the watcher was made for; it is called
	// again after a change of kind lost.
	add() error
	// closes reports whether the watch of dir reports writers closing
	// files (change kind closed) for every local write: on Linux, when
	// dir is on a local file system. Writers on other hosts of a network
	// file system reach no local watch.
	closes() bool
	// changes delivers the changes in the order they happened.
	changes() <-chan change
	// close ends the watch; changes is not read afterwards.
	close()
}

// change is one thing that happened in the watched directory.
type change struct {
	name string // the cleaned path of the file, or of the directory itself
	kind kind
	err  error // for kind failed
}

type kind uint8

const (
	written  kind = iota // data written or the file truncated
	closed               // a writer closed the file
	replaced             // the name created, removed, or renamed to or from
	touched              // attributes changed (mode, times, links)
	overflow             // changes were lost: the kernel's queue overflowed
	lost                 // the watch of the directory is gone (removed or renamed)
	failed               // reading the watch failed; err says why
)
