package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
)

// TestCtrlC sends SIGINT to the bridge's whole process group once it is
// ready, as a terminal does on Ctrl-C, and checks that the bridge stops
// gracefully: as the built binary it exits 0; under `go run`, where the go
// command is in the group too, the bridge itself stops the same way. The
// go command's own status is its business (it reports any run it saw
// interrupted as failed) and is only logged; the README says so.
func TestCtrlC(t *testing.T) {
	run := func(t *testing.T, ready time.Duration, name string, args ...string) (log string, exitErr error) {
		t.Helper()
		dir := t.TempDir()
		cfg, _, adminAddr := writeConfig(t, dir)
		writeFile(t, filepath.Join(dir, "services.yaml"), "services: [{name: web, endpoints: [{address: 10.0.0.1, port: 80}]}]\n")
		cmd := exec.Command(name, append(args, "run", cfg)...)
		cmd.Dir = ".."
		stderr := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = stderr, stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var waitErr error
		go func() {
			waitErr = cmd.Wait()
			close(done)
		}()
		t.Cleanup(func() {
			select {
			case <-done:
			default:
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		})
		bridgetest.WaitReady(t, adminAddr, ready)
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			return stderr.String(), waitErr
		case <-time.After(60 * time.Second):
			t.Fatalf("not stopped within 60s of SIGINT:\n%s", stderr)
		}
		return "", nil
	}
	stoppedCleanly := func(t *testing.T, log string) {
		t.Helper()
		if !strings.Contains(log, `msg="shutting down"`) || !strings.Contains(log, "msg=stopped") || strings.Contains(log, "\nbridge: ") {
			t.Errorf("the bridge did not stop gracefully:\n%s", log)
		}
	}

	t.Run("binary", func(t *testing.T) {
		log, err := run(t, 30*time.Second, binary)
		if err != nil {
			t.Errorf("exit %v after SIGINT to its process group, want 0\n%s", err, log)
		}
		stoppedCleanly(t, log)
	})
	t.Run("go run", func(t *testing.T) {
		goBin, err := exec.LookPath("go")
		if err != nil || testing.Short() {
			t.Skip("needs the go command (and compiles the bridge once more)")
		}
		log, err := run(t, 5*time.Minute, goBin, "run", "./cmd/bridge")
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		t.Logf("go run exited with %v (the go command's own status)", err)
		stoppedCleanly(t, log)
	})
}
