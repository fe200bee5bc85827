package testwait

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// calling goroutine, as testing.T's does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls Eventually with r on a goroutine of its own, so that a Fatalf
// ends that goroutine and not the test.
func run(r *recorder, timeout time.Duration, cond func() bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(r, timeout, "the condition", cond)
	}()
	<-done
}

func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	run(r, Patience, func() bool { calls++; return calls == 3 })
	if r.msg != "" || calls != 3 {
		t.Errorf("failed with %q after %d calls, want success on the third", r.msg, calls)
	}
}

func TestEventuallyFailsAfterTimeout(t *testing.T) {
	r := &recorder{TB: t}
	run(r, 50*time.Millisecond, func() bool { return false })
	if !strings.Contains(r.msg, "timed out after 50ms waiting for the condition") {
		t.Errorf("failure %q, want the timeout and what was waited for", r.msg)
	}
}
