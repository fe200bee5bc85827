package manager

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestChangeLogRateLimited(t *testing.T) {
	var logs testLog
	c := newChangeLog(logs.logger())
	lines := func() []string {
		var out []string
		for l := range strings.Lines(logs.buf.String()) {
			out = append(out, strings.TrimSpace(l))
		}
		return out
	}
	now := time.Unix(1000, 0)
	// A change after a quiet period is logged with its own update.
	c.note("file", '+', "search")
	c.note("file", '-', "payments")
	c.note("file", '~', "web")
	c.flush(now)
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "source=file added=1 changed=1 removed=1 services=\"[+search -payments ~web]\" updates=1") {
		t.Fatalf("lines after one edit = %q", got)
	}
	// Churn: one update a second. Nothing more until changeLogEvery has
	// passed since that line, then one line sums them all up.
	for i := range 12 {
		now = now.Add(time.Second)
		c.note("file", '~', fmt.Sprintf("svc%d", i%7))
		c.flush(now)
		if d := c.next(); !d.IsZero() && d.After(now.Add(changeLogEvery)) {
			t.Fatalf("next line due %v at %v", d, now)
		}
	}
	got := lines()
	if len(got) != 3 {
		t.Fatalf("%d lines over 12s of churn, want 3: %q", len(got), got)
	}
	if !strings.Contains(got[1], "changed=5 removed=0 services=\"[~svc0 ~svc1 ~svc2 ~svc3 ~svc4]\" updates=5") {
		t.Errorf("second line = %q, want the next five changes", got[1])
	}
	// What is left is written when due, without a further change.
	now = c.next()
	c.flush(now)
	if got := lines(); len(got) != 4 || !strings.Contains(got[3], "changed=2") {
		t.Errorf("lines = %q, want the last two changes written when due", got)
	}
	if !c.next().IsZero() {
		t.Errorf("a line is still due at %v", c.next())
	}
}

// TestChangeLogManager checks that an edit of a source is logged at INFO
// and the first sync, which the manager logs as such, is not.
func TestChangeLogManager(t *testing.T) {
	var logs testLog
	_, fakes, rec := startNamed(t, Options{Holdoff: time.Millisecond, Logger: logs.logger()}, Named{Name: "static"})
	fakes[0].send(t, fullUp(testSvc("web", "10.0.0.1"), testSvc("payments", "10.0.0.2")))
	rec.wait(t, 0)
	fakes[0].send(t, fullUp(testSvc("web", "10.0.0.1"), testSvc("search", "10.0.0.3")))
	rec.wait(t, 1)
	waitUntil(t, "the change logged", func() bool { return strings.Contains(logs.buf.String(), "source changes applied") })
	logs.want(t, "level=INFO", "source=static", "added=1 changed=0 removed=1", `services="[-payments +search]"`)
	if n := strings.Count(logs.buf.String(), "source changes applied"); n != 1 {
		t.Errorf("%d change lines, want 1 (the first sync is not one):\n%s", n, logs.buf.String())
	}
}
