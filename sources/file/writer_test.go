//go:build linux

package file

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// numbered returns a services file of n services, svc0000 on, each with
// one endpoint on port.
func numbered(n, port int) (string, []string) {
	var b strings.Builder
	names := make([]string, n)
	b.WriteString("services:\n")
	for i := range n {
		names[i] = fmt.Sprintf("svc%04d", i)
		fmt.Fprintf(&b, "- name: %s\n  endpoints: [{address: 10.0.%d.%d, port: %d}]\n", names[i], i/250, i%250+1, port)
	}
	return b.String(), names
}

// TestRunWaitsForTheWritersClose writes a 1,000-service file in place with
// the default settle and a poll every 20ms, and pauses for 5 s after the
// first 500 services, a cut where the half is a valid file on its own. No
// state of the half file is published, by the watch or the poll; the
// status says a writer keeps the file open; the whole file is published
// once the writer closes it. A writer that then closes a truncated file
// has it published: that is what the file says.
func TestRunWaitsForTheWritersClose(t *testing.T) {
	old, names := numbered(1000, 80)
	h := start(t, old, func(s *Source) {
		s.settle = DefaultSettle
		s.poll = 20 * time.Millisecond
	})
	h.next(names...)

	full, _ := numbered(1000, 81)
	cut := strings.Index(full, "- name: svc0500")
	if _, err := Parse([]byte(full[:cut]), false); err != nil {
		t.Fatalf("the first half should be valid on its own: %v", err)
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(full[:cut]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // the writer's pause: the scenario, not synchronisation
	if note := h.status.Snapshot().Notes[noteWriter]; !strings.Contains(note, "has not closed it") {
		t.Errorf("status note while the writer pauses = %q, want one saying the writer has not closed the file", note)
	}
	if _, err := f.WriteString(full[cut:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for updates := 1; ; updates++ {
		select {
		case u := <-h.up:
			if h.state, err = apply(h.state, u); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the whole file was not published after its writer closed it")
		}
		if len(h.state) != len(names) {
			t.Fatalf("update %d published a partial state of %d services", updates, len(h.state))
		}
		if onPort(h.state, 81) == len(names) {
			t.Logf("the new content arrived in %d updates", updates)
			break
		}
	}
	h.waitStatus("the writer note cleared", func(s sources.StatusSnapshot) bool { return s.Notes[noteWriter] == "" })

	if err := os.WriteFile(h.path, []byte(full[:cut]), 0o644); err != nil {
		t.Fatal(err)
	}
	h.next(names[:500]...)
}

// onPort counts the services whose endpoints are all on port.
func onPort(state map[string]sources.Service, port uint32) int {
	n := 0
	for _, s := range state {
		all := len(s.Endpoints) > 0
		for _, e := range s.Endpoints {
			all = all && e.Port == port
		}
		if all {
			n++
		}
	}
	return n
}
