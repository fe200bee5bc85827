package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/procstat"
)

// filePoll is the file source's poll interval in these tests; the source
// also reads the file when its directory's watch reports a change.
const filePoll = 250 * time.Millisecond

// nobody is the unprivileged user the bridge runs as when the tests run as
// root, who reads files of any mode.
const nobody = 65534

// TestFileFaults breaks the services file six ways, one after the other
// on one bridge: deleted, turned into a directory, made unreadable (mode
// 000), replaced by a symlink loop, filled with garbage, grown to 200 MB.
// During each the bridge keeps the last good services, shows the source
// stale, logs the failure once, reads the file no more often than its
// poll and the changes made to it ask, and never reads the 200 MB; after
// each, the fixed file's new content reaches the watcher.
func TestFileFaults(t *testing.T) { //nolint:tparallel // its subtests are the steps of one fault, in order; the test runs beside the other faults
	t.Parallel()
	// A directory others may enter: as root, the bridge runs as nobody so
	// that a mode-000 file is unreadable to it.
	dir, err := os.MkdirTemp("", "xdsbridge-file-faults")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "services.yaml")
	services := []string{"web 10.0.0.1", "api 10.0.0.2"}
	content := func() string {
		var b strings.Builder
		b.WriteString("services:\n")
		for _, s := range services {
			name, addr, _ := strings.Cut(s, " ")
			fmt.Fprintf(&b, "  - name: %s\n    endpoints: [{address: %s, port: 80}]\n", name, addr)
		}
		return b.String()
	}
	// replace puts a new file (or directory, or link) in place of the
	// services file at once, as a deployment tool's rename does.
	replace := func(write func(tmp string) error) {
		t.Helper()
		tmp := filepath.Join(dir, ".next")
		if err := os.RemoveAll(tmp); err != nil {
			t.Fatal(err)
		}
		if err := write(tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	writeContent := func(s string, mode os.FileMode) func(string) error {
		return func(tmp string) error {
			if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
				return err
			}
			return os.Chmod(tmp, mode)
		}
	}
	replace(writeContent(content(), 0o644))

	o := bridgeOptions{}
	if os.Geteuid() == 0 {
		o.uid = nobody
	}
	b := startBridge(t, dir, fmt.Sprintf(`  - name: file
    type: file
    path: %s
    poll_interval: %s
`, path, filePoll), o)
	w := startWatcher(t, b.xds)
	w.waitHolds("the file's services", view{"web": {"10.0.0.1:80"}, "api": {"10.0.0.2:80"}})
	b.baseline()

	faults := []struct {
		name string
		make func(tmp string) error
	}{
		{"deleted", nil},
		{"turned into a directory", func(tmp string) error { return os.Mkdir(tmp, 0o755) }},
		{"mode 000", writeContent(content(), 0)},
		{"symlink loop", func(tmp string) error { return os.Symlink("services.yaml", tmp) }},
		{"garbage", writeContent("services:\n  - name: web\n    endpoints: [{address: \x00\xff\xfe, port: http}]\n\x01\x02", 0o644)},
		{"200 MB", func(tmp string) error {
			f, err := os.Create(tmp)
			if err != nil {
				return err
			}
			defer f.Close()
			// Sparse: the size is what the source looks at first.
			return f.Truncate(200 << 20)
		}},
	}
	for i, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			defer b.in(t)()
			defer w.in(t)()
			w.guard()
			before := b.status("file")
			io0, err := procstat.Read(b.pid())
			if err != nil {
				t.Fatal(err)
			}
			win := b.openWindow(t, nil)
			if fault.make == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				replace(fault.make)
			}
			s := b.waitStatus("file", "stale after 4 failed reads", func(s manager.SourceStatus) bool {
				return s.Stale && s.Failures >= 4 && s.LastError != ""
			})
			d := time.Since(win.start)
			// Reads: one a poll, and those the watch's events of the
			// change ask for (a handful: the removal, the rename).
			reads := s.FailuresTotal - before.FailuresTotal
			if limit := every(filePoll, d) + 4; reads > uint64(limit) {
				t.Errorf("%s: %d failed reads in %s, more than the %d polls and events allow", fault.name, reads, d, limit)
			}
			// What the bridge read meanwhile, files and sockets alike: the
			// admin requests of the test, never the 200 MB.
			if io1, err := procstat.Read(b.pid()); err == nil {
				if read := io1.Sub(io0).ReadBytes; read > 16<<20 {
					t.Errorf("%s: the bridge read %d MiB during the fault", fault.name, read>>20)
				}
			}
			t.Logf("%s: %d failed reads in %s; error %q", fault.name, reads, d.Round(time.Millisecond), s.LastError)
			win.checkLogs("file", 1)
			w.release()

			// The file is fixed, with one more service.
			name := fmt.Sprintf("new%d", i)
			services = append(services, fmt.Sprintf("%s 10.0.1.%d", name, i+1))
			replace(writeContent(content(), 0o644))
			w.wait("the fixed file's new service", func(v view) bool { return len(v[name]) == 1 })
			b.waitStatus("file", "fresh again", func(s manager.SourceStatus) bool { return !s.Stale })
		})
	}
	b.settled()
}
