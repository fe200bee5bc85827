// Package faults runs the bridge binary against real dependencies (a Consul
// agent, CoreDNS, services files, HTTP servers, xDS clients) and breaks each
// dependency in turn. Every test asserts what the bridge does during the
// fault, not only where it ends: the work it sends at the failing
// dependency (counted outside the bridge, by a proxy or by the server,
// and bounded from above: a loaded machine does fewer requests, never
// more), the log lines it writes, the staleness it shows in /sources, and
// that no removal reaches a watching xDS client; and after the fault, that
// the registry's new state reaches the client and that the bridge's
// goroutines and heap come back.
//
// No test sleeps to synchronise and none asserts a latency: a fault
// window ends on a condition (so many failed reads reported), and every
// bound grows with the time the window took.
package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
)

// binary is the bridge built once by TestMain.
var binary string

func TestMain(m *testing.M) { os.Exit(bridgetest.RunWithBinary(m, raceEnabled, &binary)) }

// patience bounds every wait for a condition (see bridgetest.Patience).
const patience = bridgetest.Patience

// bridge is a running bridge process.
type bridge struct {
	t               *testing.T
	dir, xds, admin string
	cmd             *exec.Cmd
	stderr          *syncbuf.Buffer
	done            chan struct{}
	baseGoroutines  int
	baseHeap        int64
}

// bridgeOptions change how startBridge runs the bridge.
type bridgeOptions struct {
	// top is added to the configuration's top level.
	top string
	// uid, when not 0, runs the bridge as that user (and group).
	uid int
}

// startBridge writes a configuration serving sources (the YAML of the
// sources list's items, indented by two spaces) from dir, runs the bridge on
// it with JSON logs at info level, and waits until it is ready. A cleanup
// stops it (SIGTERM) and checks that it exits 0.
func startBridge(t *testing.T, dir, sources string, o bridgeOptions) *bridge {
	t.Helper()
	b := &bridge{t: t, dir: dir, xds: freeport.Addr(t), admin: freeport.Addr(t), stderr: &syncbuf.Buffer{},
		done: make(chan struct{})}
	cfg := filepath.Join(dir, "bridge.yaml")
	text := fmt.Sprintf("xds: {listen: %s}\nadmin: {listen: %s, pprof: true}\nlog: {level: info, format: json}\n%s\nsources:\n%s",
		b.xds, b.admin, o.top, sources)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command(binary, "run", "--config", cfg)
	b.cmd.Stderr = b.stderr
	childproc.Tie(b.cmd)
	if o.uid != 0 {
		b.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(o.uid), Gid: uint32(o.uid)}
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	go func() {
		waitErr = b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bridge log (tail):\n%s", tail(b.stderr.String(), 12000))
		}
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
			if waitErr != nil {
				t.Errorf("bridge exited with %v after SIGTERM, want 0", waitErr)
			}
		case <-time.After(30 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
			t.Errorf("bridge did not stop within 30s of SIGTERM")
		}
	})
	bridgetest.Eventually(t, patience, "the bridge to answer /readyz", func() bool {
		select {
		case <-b.done:
			t.Fatalf("the bridge exited: %s", tail(b.stderr.String(), 4000))
		default:
		}
		code, _ := bridgetest.Get("http://" + b.admin + "/readyz")
		return code == http.StatusOK
	})
	return b
}

// in makes t, a subtest, the test that b's checks fail, until the
// returned function is called: subtests run one after the other on one
// bridge, and a failure must be reported (and stop) the subtest that
// found it.
func (b *bridge) in(t *testing.T) (restore func()) {
	t.Helper()
	prev := b.t
	b.t = t
	return func() { b.t = prev }
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// logLine is one line of the bridge's JSON log.
type logLine struct {
	Level  string `json:"level"`
	Msg    string `json:"msg"`
	Source string `json:"source"`
	raw    string
}

// lines returns the bridge's log lines so far, from the nth on.
func (b *bridge) lines(from int) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(b.stderr.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for i := 0; sc.Scan(); i++ {
		if i < from {
			continue
		}
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			l = logLine{Level: "?", Msg: sc.Text()}
		}
		l.raw = sc.Text()
		out = append(out, l)
	}
	return out
}

// logMark returns the number of log lines so far, the start of a window.
func (b *bridge) logMark() int { return len(b.lines(0)) }

// problems returns the WARN and ERROR lines from the mark on that concern
// the named source (or that name no source, when source is "").
func (b *bridge) problems(from int, source string) []string {
	var out []string
	for _, l := range b.lines(from) {
		if (l.Level == "WARN" || l.Level == "ERROR" || l.Level == "?") && (source == "" || l.Source == source) {
			out = append(out, l.raw)
		}
	}
	return out
}

// waitLog waits for a log line from the mark on whose message holds msg.
func (b *bridge) waitLog(from int, msg string) {
	b.t.Helper()
	bridgetest.Eventually(b.t, patience, fmt.Sprintf("a log line %q", msg), func() bool {
		for _, l := range b.lines(from) {
			if strings.Contains(l.Msg, msg) {
				return true
			}
		}
		return false
	})
}

// status returns the /sources entry of the named source.
func (b *bridge) status(name string) manager.SourceStatus {
	b.t.Helper()
	return bridgetest.SourceStatus(b.t, b.admin, name)
}

// waitStatus waits until the named source's status satisfies cond.
func (b *bridge) waitStatus(name, what string, cond func(manager.SourceStatus) bool) manager.SourceStatus {
	b.t.Helper()
	var s manager.SourceStatus
	bridgetest.Eventually(b.t, patience, fmt.Sprintf("source %s: %s", name, what), func() bool {
		s = b.status(name)
		return cond(s)
	})
	return s
}

var (
	heapAlloc  = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)
	goroutines = regexp.MustCompile(`^goroutine profile: total (\d+)`)
)

// profile reads one figure of the bridge's profiler.
func (b *bridge) profile(path string, re *regexp.Regexp) int64 {
	b.t.Helper()
	code, body := bridgetest.Get("http://" + b.admin + path)
	m := re.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		b.t.Fatalf("GET %s = %d %q", path, code, tail(body, 300))
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// heap returns the bridge's live heap after a forced collection.
func (b *bridge) heap() int64 { return b.profile("/debug/pprof/heap?debug=1&gc=1", heapAlloc) }

// goroutineCount returns the bridge's goroutines.
func (b *bridge) goroutineCount() int {
	return int(b.profile("/debug/pprof/goroutine?debug=1", goroutines))
}

// baseline records the goroutines and live heap of a bridge at rest, for
// settled to compare with.
func (b *bridge) baseline() {
	b.t.Helper()
	b.baseGoroutines, b.baseHeap = b.goroutineCount(), b.heap()
}

// Slack of settled: a bridge back at rest may hold a few more goroutines
// (an idle connection's) and a little more heap (buffers grown for a
// larger answer) than before the fault, but not what the fault itself
// cost.
const (
	goroutineSlack = 20
	heapSlack      = 16 << 20
)

// settled waits until the bridge's goroutines and live heap are back
// within slack of the baseline.
func (b *bridge) settled() {
	b.t.Helper()
	var g int
	var h int64
	bridgetest.Eventually(b.t, patience, "goroutines and heap back to the baseline", func() bool {
		g, h = b.goroutineCount(), b.heap()
		return g <= b.baseGoroutines+goroutineSlack && h <= b.baseHeap+heapSlack
	})
	b.t.Logf("at rest again: %d goroutines (%d before), live heap %d KiB (%d KiB before)",
		g, b.baseGoroutines, h>>10, b.baseHeap>>10)
}

// pid is the bridge's process id.
func (b *bridge) pid() int { return b.cmd.Process.Pid }
