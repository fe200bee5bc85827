//go:build linux

package file

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// inotifyMask is what the watch asks for: fsnotify's portable events plus
// IN_CLOSE_WRITE, which fsnotify v1.10 keeps unexported. Opens, reads and
// closes after reading are left out: the source's own reads would show up.
const inotifyMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_CREATE |
	unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR

// inotify watches one directory through an inotify instance of its own.
// One instance keeps every change in the order the kernel saw it, which is
// what lets a close be matched with the writes before it.
type inotify struct {
	f     *os.File // the instance; its reads wait in the runtime's poller, and closing it ends them
	fd    int
	dir   string
	local bool // dir is on a local file system (see closes)
	out   chan change
	wg    sync.WaitGroup
}

func newWatcher(ctx context.Context, dir string) (watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("creating an inotify instance: %w", err)
	}
	w := &inotify{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, dir: dir, out: make(chan change)}
	w.wg.Add(1)
	go w.read(ctx)
	return w, nil
}

func (w *inotify) add() error {
	if _, err := unix.InotifyAddWatch(w.fd, w.dir, inotifyMask); err != nil {
		return &os.PathError{Op: "watch", Path: w.dir, Err: err}
	}
	var st unix.Statfs_t
	w.local = unix.Statfs(w.dir, &st) == nil && !remote[uint32(st.Type)]
	return nil
}

func (w *inotify) closes() bool { return w.local }

func (w *inotify) changes() <-chan change { return w.out }

func (w *inotify) close() {
	w.f.Close()
	w.wg.Wait()
}

// remote holds the file systems whose files other hosts may write (their
// statfs magic numbers): such writes reach no local watch, closes
// included. FUSE is among them, since sshfs, gcsfuse and the like serve
// remote files through it.
var remote = map[uint32]bool{
	unix.NFS_SUPER_MAGIC:   true,
	unix.SMB_SUPER_MAGIC:   true,
	unix.SMB2_SUPER_MAGIC:  true,
	unix.CIFS_SUPER_MAGIC:  true,
	unix.V9FS_MAGIC:        true,
	unix.CEPH_SUPER_MAGIC:  true,
	unix.FUSE_SUPER_MAGIC:  true,
	unix.AFS_FS_MAGIC:      true,
	unix.AFS_SUPER_MAGIC:   true,
	unix.CODA_SUPER_MAGIC:  true,
	unix.OCFS2_SUPER_MAGIC: true,
	0x01161970:             true, // GFS2
	0x0bd00bd0:             true, // Lustre
}

// read turns the instance's events into changes until it is closed.
func (w *inotify) read(ctx context.Context) {
	defer w.wg.Done()
	defer close(w.out)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.send(ctx, change{name: w.dir, kind: failed, err: fmt.Errorf("reading inotify events: %w", err)})
			}
			return
		}
		// Each event is struct inotify_event: wd, mask, cookie and len
		// (int32, uint32, uint32, uint32, native order), then len bytes of
		// NUL-padded name.
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			size := int(binary.NativeEndian.Uint32(buf[off+12:]))
			start := off + unix.SizeofInotifyEvent
			off = min(start+size, n)
			name := strings.TrimRight(string(buf[start:off]), "\x00")
			if !w.send(ctx, w.translate(mask, name)) {
				return
			}
		}
	}
}

func (w *inotify) translate(mask uint32, name string) change {
	c := change{name: w.dir, kind: touched}
	if name != "" {
		c.name = filepath.Join(w.dir, name)
	}
	switch {
	case mask&unix.IN_Q_OVERFLOW != 0:
		c.name, c.kind = w.dir, overflow
	case mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0:
		c.name, c.kind = w.dir, lost
	case mask&unix.IN_MODIFY != 0:
		c.kind = written
	case mask&unix.IN_CLOSE_WRITE != 0:
		c.kind = closed
	case mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0:
		c.kind = replaced
	}
	return c
}

func (w *inotify) send(ctx context.Context, c change) bool {
	select {
	case w.out <- c:
		return true
	case <-ctx.Done():
		return false
	}
}
