package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// agent is a Consul agent in -dev mode (its catalog lives in memory, so a
// restart brings it back empty) on loopback ports fixed when it is made,
// so that it comes back on the same ones.
type agent struct {
	bin, log  string
	args      []string
	http      string // host:port of the HTTP API
	https     string // host:port of the HTTPS API, "" without TLS
	cmd       *exec.Cmd
	exited    chan struct{}
	harnessTr *http.Transport
}

// newAgent prepares an agent whose files go to dir; with tls (the CA, the
// certificate and its key), it also serves HTTPS.
func newAgent(bin, dir string, tls []string) (*agent, error) {
	p, err := freeport.Take(8)
	if err != nil {
		return nil, err
	}
	a := &agent{bin: bin, log: filepath.Join(dir, "consul.log"), http: "127.0.0.1:" + strconv.Itoa(p[0]),
		harnessTr: &http.Transport{MaxIdleConnsPerHost: 4}}
	https := "-1"
	if tls != nil {
		https, a.https = strconv.Itoa(p[7]), "127.0.0.1:"+strconv.Itoa(p[7])
	}
	a.args = []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
		"-node", "faults", "-log-level", "warn",
		"-http-port", strconv.Itoa(p[0]), "-https-port", https, "-dns-port", "-1",
		"-serf-lan-port", strconv.Itoa(p[1]), "-serf-wan-port", strconv.Itoa(p[2]),
		"-server-port", strconv.Itoa(p[3]), "-grpc-port", strconv.Itoa(p[4]), "-grpc-tls-port", strconv.Itoa(p[5])}
	hcl := "disable_update_check = true\n"
	if tls != nil {
		hcl += fmt.Sprintf("tls { defaults { ca_file = %q, cert_file = %q, key_file = %q } }\n", tls[0], tls[1], tls[2])
	}
	conf := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(conf, []byte(hcl), 0o600); err != nil {
		return nil, err
	}
	a.args = append(a.args, "-config-file", conf)
	return a, nil
}

// start starts the agent and waits until it has a leader.
func (a *agent) start(ctx context.Context) error {
	logf, err := os.OpenFile(a.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(a.bin, a.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting consul: %w", err)
	}
	a.cmd, a.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}(a.exited)
	c := a.client()
	return poll(ctx, time.Minute, func() bool {
		select {
		case <-a.exited:
			return true
		default:
		}
		l, err := c.Status().Leader()
		return err == nil && l != ""
	}, func() error {
		select {
		case <-a.exited:
			return errors.New("consul exited before electing a leader; see " + a.log)
		default:
			return nil
		}
	})
}

// stop ends the agent with sig and waits for it to exit.
func (a *agent) stop(sig syscall.Signal) {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(sig)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	a.cmd = nil
	a.harnessTr.CloseIdleConnections()
}

// client is an API client of the agent's HTTP port, for the harness's
// registrations.
func (a *agent) client() *api.Client {
	c, _ := api.NewClient(&api.Config{Address: a.http, Scheme: "http", Transport: a.harnessTr})
	return c
}

// poll checks cond every 20 ms until it holds, ctx ends or limit passes;
// after each check, fatal (if not nil) may end the wait with an error.
func poll(ctx context.Context, limit time.Duration, cond func() bool, fatal func() error) error {
	deadline := time.Now().Add(limit)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		if fatal != nil {
			if err := fatal(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if fatal != nil {
		return fatal()
	}
	return nil
}
