package pacing

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/syncbuf"
)

func TestFailureLog(t *testing.T) {
	var buf syncbuf.Buffer
	now := time.Unix(1000, 0)
	f := FailureLog{Log: slog.New(slog.NewTextHandler(&buf, nil)), FailingMsg: "reading the registry failed",
		RecoveredMsg: "reading the registry works again", Now: func() time.Time { return now }}
	fail := errors.New("connection refused")
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	if f.Recovered() || buf.String() != "" {
		t.Fatalf("a success before any failure logged %q", buf.String())
	}
	// A thousand failures over two and a half minutes: the first, then
	// one line a minute with the count since the previous line.
	for i := range 1000 {
		now = time.Unix(1000, 0).Add(time.Duration(i) * 150 * time.Millisecond)
		f.Failed(fail, "dep", "x")
	}
	got := lines()
	if len(got) != 3 {
		t.Fatalf("%d lines for 1000 failures over 150 s, want 3 (entry, then one a minute):\n%s", len(got), buf.String())
	}
	if !strings.Contains(got[0], "level=WARN") || strings.Contains(got[0], "failures=") ||
		!strings.Contains(got[0], "dep=x") || !strings.Contains(got[0], `err="connection refused"`) {
		t.Errorf("entry line %q", got[0])
	}
	if !strings.Contains(got[1], "failures=400") || !strings.Contains(got[1], "failing_for=1m0s") {
		t.Errorf("first repeat line %q, want 400 failures after 1m0s", got[1])
	}
	if !f.Failing() {
		t.Error("Failing() = false while failing")
	}

	if !f.Recovered("dep", "x") {
		t.Fatal("Recovered after failures reported false")
	}
	got = lines()
	if last := got[len(got)-1]; !strings.Contains(last, "level=INFO") || !strings.Contains(last, "failures=1000") ||
		!strings.Contains(last, "works again") {
		t.Errorf("recovery line %q, want INFO with the period's 1000 failures", last)
	}
	if f.Recovered() || f.Failing() {
		t.Error("a second success logged a recovery, or the log still says failing")
	}

	// A new period logs its first failure at once, at the level asked.
	f.Level = slog.LevelError
	n := len(lines())
	f.Failed(fail)
	if got := lines(); len(got) != n+1 || !strings.Contains(got[n], "level=ERROR") {
		t.Errorf("the first failure of a new period: %q", got[n:])
	}

	// With NewErrors, a changed error is logged at once; the same one is
	// not.
	f.NewErrors = true
	n = len(lines())
	f.Failed(fail)
	f.Failed(errors.New("line 3: bad port"))
	f.Failed(errors.New("line 3: bad port"))
	if got := len(lines()) - n; got != 1 {
		t.Errorf("%d lines for the same error, then a new one twice, want 1", got)
	}
}
