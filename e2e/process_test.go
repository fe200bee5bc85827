package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// binary is the bridge built once by TestMain.
var binary string

func TestMain(m *testing.M) { os.Exit(bridgetest.RunWithBinary(m, raceEnabled, &binary)) }

// goBuild builds the package pkg into out, with the race detector when the
// tests run with it, so that the programs the tests start are checked too.
func goBuild(out, pkg string) error { return bridgetest.Build(out, pkg, raceEnabled) }

// syncBuffer is an io.Writer safe for the process's output copier and the
// test reading it.
type syncBuffer = bridgetest.LogBuffer

// process is a running bridge, or another program a test starts.
type process struct {
	t      *testing.T
	name   string // the program's name, for messages
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	err    error // of Wait, once done is closed
}

// start runs `bridge run --config cfg` with extra args; a cleanup stops it
// with SIGTERM and checks that it exits 0 (a graceful stop).
func start(t *testing.T, cfg string, args ...string) *process {
	t.Helper()
	return startEnv(t, nil, append([]string{"run", "--config", cfg}, args...)...)
}

// startEnv runs the bridge with args and env added to the environment.
func startEnv(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return startProgram(t, "bridge", exec.Command(binary, args...), env)
}

// startProgram starts cmd, with env added to the environment, collecting
// its output; a cleanup stops it with SIGTERM and checks that it exits 0.
// name names it in messages.
func startProgram(t *testing.T, name string, cmd *exec.Cmd, env []string) *process {
	t.Helper()
	p := &process{t: t, name: name, cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = p.stderr
	childproc.Tie(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			if out := p.stdout.String(); out != "" {
				t.Logf("%s stdout:\n%s", name, out)
			}
			t.Logf("%s stderr:\n%s", name, p.stderr)
		}
		select {
		case <-p.done:
			return // it ended on its own; the test has checked why
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("%s exited with %v after SIGTERM, want 0", name, p.err)
			}
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("%s did not stop within 15s of SIGTERM", name)
		}
	})
	return p
}

// waitLog waits until the bridge's stderr has a line containing every one
// of parts, and returns that line.
func (p *process) waitLog(timeout time.Duration, parts ...string) string {
	p.t.Helper()
	var line string
	bridgetest.Eventually(p.t, timeout, fmt.Sprintf("a log line with %q", parts), func() bool {
		for l := range strings.Lines(p.stderr.String()) {
			if containsAll(l, parts...) {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

func containsAll(s string, parts ...string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}

// runBinary runs the bridge with args to completion and returns its exit
// code and combined output.
func runBinary(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("running bridge %v: %v\n%s", args, err, out)
	return 0, ""
}

// writeFile replaces path atomically, as editors and consul-template do.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// writeConfig writes a bridge.yaml serving services.yaml from dir on free
// ports and returns its path and the xDS and admin addresses.
func writeConfig(t *testing.T, dir string) (cfg, xdsAddr, adminAddr string) {
	t.Helper()
	xdsAddr, adminAddr = freeport.Addr(t), freeport.Addr(t)
	cfg = filepath.Join(dir, "bridge.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
xds:
  listen: %s
admin:
  listen: %s
log: {level: info, format: text}
sources:
  - name: static
    type: file
    path: services.yaml
    poll_interval: 1s
`, xdsAddr, adminAddr))
	return cfg, xdsAddr, adminAddr
}
