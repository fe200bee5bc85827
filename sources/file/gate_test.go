package file

import (
	"testing"
	"time"
)

// TestGate walks the gate through sequences of changes and checks, after
// the last, whether it asks for a read, whether a writer holds the file,
// and how long the file must then have been quiet.
func TestGate(t *testing.T) {
	const (
		path     = "/d/services.yaml"
		debounce = 100 * time.Millisecond
		settle   = time.Second
	)
	on := func(k kind) change { return change{name: path, kind: k} }
	other := func(k kind) change { return change{name: "/d/.services.yaml.tmp", kind: k} }
	tests := []struct {
		name       string
		closeWrite bool
		changes    []change
		read, open bool
		quiet      time.Duration
	}{
		{"a write waits for its close", true, []change{on(written)}, false, true, debounce},
		{"the close brings the read", true, []change{on(written), on(written), on(closed)}, true, false, debounce},
		{"a second writer opens it again", true, []change{on(written), on(closed), on(written)}, false, true, debounce},
		{"a rename over it ends the wait", true, []change{on(written), on(replaced)}, true, false, debounce},
		{"another file's write is no change", true, []change{other(written)}, false, false, debounce},
		{"another file's close or rename may be", true, []change{other(written), other(closed)}, true, false, debounce},
		{"lost changes fall back to settle", true, []change{on(written), {name: "/d", kind: overflow}}, true, false, settle},
		{"a lost watch falls back to settle", true, []change{on(written), {name: "/d", kind: lost}}, true, false, settle},
		{"after a fallback the close rules again", true, []change{{name: "/d", kind: overflow}, on(written), on(closed)}, true, false, debounce},
		{"attributes are read at once", true, []change{on(touched)}, true, false, debounce},
		{"without closes a write waits for settle", false, []change{on(written)}, true, false, settle},
		{"without closes a rename is read at once", false, []change{on(written), on(replaced)}, true, false, 0},
		{"without closes another file's write may be a change", false, []change{other(written)}, true, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gate{closeWrite: tt.closeWrite}
			var read bool
			for _, c := range tt.changes {
				read = g.see(c, path)
			}
			if read != tt.read || g.open != tt.open {
				t.Errorf("read, open = %v, %v; want %v, %v", read, g.open, tt.read, tt.open)
			}
			if q := g.quiet(debounce, settle); q != tt.quiet {
				t.Errorf("quiet = %v, want %v", q, tt.quiet)
			}
		})
	}
}
