package bridge

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/comments"
)

// TestCommentFigures holds the durations the comments of deploy/ and
// examples/ give to the code's: how long a stopping bridge gives its open
// streams, and a source's default startup timeout.
func TestCommentFigures(t *testing.T) {
	found := 0
	for _, c := range []struct {
		re   string
		want time.Duration
	}{
		{`open (?:ones|streams) (\d+) ?s\b`, shutdownTimeout},
		{`startup\.timeout \((\d+) ?s\)`, manager.DefaultStartupTimeout},
	} {
		ms, err := comments.Find("..", regexp.MustCompile(c.re))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			found++
			n, _ := strconv.Atoi(m.Groups[1])
			if got := time.Duration(n) * time.Second; got != c.want {
				t.Errorf("%s:%d: %q says %v, the code %v", m.File, m.Line, m.Groups[0], got, c.want)
			}
		}
	}
	if found < 3 {
		t.Errorf("%d figures found, want those of the Deployment and the Nomad job", found)
	}
}
