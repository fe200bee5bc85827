package sources

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/syncbuf"
)

// TestOutageLogsBounded: a thousand failures over ten minutes log one line
// on entry, about one a minute, and one on recovery.
func TestOutageLogsBounded(t *testing.T) {
	var buf syncbuf.Buffer
	now := time.Unix(0, 0)
	o := Outage{Log: slog.New(slog.NewTextHandler(&buf, nil)), Status: NewStatus("s"), Failing: "failing", Recovered: "recovered",
		now: func() time.Time { return now }}
	for range 1000 {
		o.Fail(errors.New("refused"))
		now = now.Add(600 * time.Millisecond)
	}
	if !o.Status.Snapshot().Stale || o.Status.Snapshot().Failures != 1000 {
		t.Fatalf("status %+v", o.Status.Snapshot())
	}
	o.Recover()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if n := len(lines); n < 10 || n > 12 {
		t.Fatalf("%d log lines for a 10-minute outage, want 1 + ~10 + 1:\n%s", n, buf.String())
	}
	if !strings.Contains(lines[1], "failures=100") || !strings.Contains(lines[len(lines)-1], "recovered") || o.Status.Snapshot().Stale {
		t.Fatalf("lines:\n%s", buf.String())
	}
}
