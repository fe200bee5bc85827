package fanout

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/target"
)

// server is one server process under test, started as `<bin> serve`.
type server struct {
	cmd     *exec.Cmd
	xds     string
	control string
	http    *http.Client
	waited  chan error
}

// startServer starts the server process and waits for its READY line.
// Its stderr goes to logPath.
// The server is cfg's: its binary, implementation, holdoff, streams limit,
// transport options and CPUs.
func startServer(ctx context.Context, cfg Config, logPath string) (*server, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating server log: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	impl := cfg.Impl
	args := []string{cfg.Bin, "serve", "--impl", impl, "--holdoff", cfg.Holdoff.String(), "--max-holdoff", cfg.MaxHoldoff.String(),
		"--streams", strconv.Itoa(cfg.Streams), "--grpc-buffers", strconv.Itoa(cfg.GRPCBuffers),
		"--keepalive-timeout", cfg.KeepaliveTimeout.String()}
	if cpus := cfg.ServerCPUs; cpus != "" {
		// taskset sets the mask before exec, so every thread of the
		// server inherits it (and the process keeps taskset's pid).
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = logf
	// The server alone may be given a soft memory limit (the fleet, in
	// this process, holds far more memory than the server); the load
	// generator's own (GOMEMLIMIT in its environment, for a large fleet)
	// is not passed on.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	if v := os.Getenv("XDSLOAD_SERVER_GOMEMLIMIT"); v != "" {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+v)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("piping server stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting server %s: %w", impl, err)
	}
	s := &server{cmd: cmd, http: &http.Client{Timeout: 5 * time.Minute}, waited: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
		s.waited <- cmd.Wait()
	}()
	select {
	case line, ok := <-lines:
		if !ok || !strings.HasPrefix(line, "READY ") {
			s.stop()
			return nil, fmt.Errorf("server %s did not start (see %s): %q", impl, logPath, line)
		}
		for _, f := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "xds":
				s.xds = v
			case "control":
				s.control = v
			}
		}
		return s, nil
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	s.stop()
	return nil, fmt.Errorf("server %s not ready (see %s)", impl, logPath)
}

func (s *server) post(ctx context.Context, path string, q url.Values) error {
	u := "http://" + s.control + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("calling %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("calling %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func (s *server) stats(ctx context.Context) (target.Stats, error) {
	var st target.Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.control+"/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return st, fmt.Errorf("reading server stats: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("decoding server stats: %w", err)
	}
	return st, nil
}

// stop ends the process: SIGTERM, then SIGKILL after 5 s.
func (s *server) stop() {
	s.http.CloseIdleConnections()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.waited
	}
}

type targetStats = target.Stats

// errTimeout marks a change or a start that did not converge in time.
var errTimeout = errors.New("timed out")
