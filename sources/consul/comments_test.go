package consul

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/comments"
)

// TestCommentFigures holds the figures that the comments of deploy/ and
// examples/ give about the Consul source's connections to its defaults:
// the watches one HTTP/2 connection carries, the default connection
// budget against Consul's default per-client limit, the services plain
// HTTP watches, and the connections HTTPS needs for a number of services.
func TestCommentFigures(t *testing.T) {
	s, err := New(nil, sources.Options{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := s.cfg.plan(false, consulDefaultConnsPerClient), s.cfg.plan(true, consulDefaultConnsPerClient)
	root := filepath.Join("..", "..")
	num := func(s string) int {
		n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return n
	}
	checks := []struct {
		what string
		re   string
		want func(m []string) (got, want int)
	}{
		{"watches per HTTP/2 connection", `carries (\d+) (?:watched services|watches|per-service watches)`,
			func(m []string) (int, int) { return num(m[1]), h2.perLane }},
		{"the default connection budget", `the default (\d+) connections|max_connections: (\d+) +# default`,
			func(m []string) (int, int) { return num(m[1] + m[2]), h1.budget }},
		{"services watched over plain HTTP", `(\d+) (?:services )?are watched`,
			func(m []string) (int, int) { return num(m[1]), h1.capacity() }},
		{"connections HTTPS needs", `([\d,]+) services on (\d+) connections`,
			func(m []string) (int, int) {
				return num(m[2]), 1 + (num(m[1])+h2.perLane-1)/h2.perLane
			}},
	}
	found := 0
	for _, c := range checks {
		ms, err := comments.Find(root, regexp.MustCompile(c.re))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			found++
			t.Logf("%s:%d: %q", m.File, m.Line, m.Groups[0])
			if got, want := c.want(m.Groups); got != want {
				t.Errorf("%s:%d: %q gives %d for %s, the code %d", m.File, m.Line, m.Groups[0], got, c.what, want)
			}
		}
	}
	if found < 5 {
		t.Errorf("%d figures found in the comments, want at least those of the Kubernetes ConfigMap and examples/consul", found)
	}
}
