package xdsserver

import (
	"bufio"
	"context"
	"encoding/json"
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
)

// Process is one server process under test, started as `<bin> serve`.
type Process struct {
	cmd *exec.Cmd
	// XDS is the address its xDS server listens on.
	XDS     string
	control string
	http    *http.Client
	waited  chan error
}

// serveArgs is the serve command's arguments for opts. The transport
// options are passed only when set: zero is the server's default either
// way, and a server built from an older commit, compared under this load
// generator, does not know them.
func serveArgs(opts Options) []string {
	args := []string{"serve", "--impl", opts.Impl, "--holdoff", opts.Holdoff.String(), "--max-holdoff", opts.MaxHoldoff.String()}
	if opts.Streams != 0 {
		args = append(args, "--streams", strconv.Itoa(opts.Streams))
	}
	if opts.GRPCBuffers != 0 {
		args = append(args, "--grpc-buffers", strconv.Itoa(opts.GRPCBuffers))
	}
	if opts.KeepaliveTimeout != 0 {
		args = append(args, "--keepalive-timeout", opts.KeepaliveTimeout.String())
	}
	return args
}

// Start starts `<bin> serve` with the implementation, holdoff, streams
// limit and transport options of opts (the process picks its listen
// addresses and logs on its own), on the CPUs of the list cpus (taskset
// -c) if it is not empty, and waits for its READY line. Its stderr goes to
// logPath.
func Start(ctx context.Context, bin string, opts Options, cpus, logPath string) (*Process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating server log: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	impl := opts.Impl
	args := append([]string{bin}, serveArgs(opts)...)
	if cpus != "" {
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
	s := &Process{cmd: cmd, http: &http.Client{Timeout: 5 * time.Minute}, waited: make(chan error, 1)}
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
			s.Stop()
			return nil, fmt.Errorf("server %s did not start (see %s): %q", impl, logPath, line)
		}
		for _, f := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "xds":
				s.XDS = v
			case "control":
				s.control = v
			}
		}
		return s, nil
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	s.Stop()
	return nil, fmt.Errorf("server %s not ready (see %s)", impl, logPath)
}

// Post calls the control API (POST path?q); an error unless it answers
// 200.
func (s *Process) Post(ctx context.Context, path string, q url.Values) error {
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

// Stats reads the control API's /stats.
func (s *Process) Stats(ctx context.Context) (Stats, error) {
	var st Stats
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

// Pid is the server process's id.
func (s *Process) Pid() int { return s.cmd.Process.Pid }

// Stop ends the process: SIGTERM, then SIGKILL after 5 s.
func (s *Process) Stop() {
	s.http.CloseIdleConnections()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.waited
	}
}

// Settled garbage-collects the server, waits until its CPU use stops
// (no more than 2 ms in 200 ms, at most 10 s) and returns its stats.
func (s *Process) Settled(ctx context.Context) (s0 Stats, err error) {
	s0, err = s.Stats(ctx)
	for range 50 {
		if err != nil {
			return s0, err
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return s0, ctx.Err()
		}
		var s1 Stats
		if s1, err = s.Stats(ctx); err == nil && s1.CPU()-s0.CPU() < 2*time.Millisecond {
			if err := s.Post(ctx, "/gc", nil); err != nil {
				return s1, err
			}
			return s.Stats(ctx)
		}
		s0 = s1
	}
	return s0, err
}
