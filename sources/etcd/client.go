package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/xdsbridge/xdsbridge/internal/filestamp"
)

// maxResponseBytes bounds one answer from etcd (a page of a read, a batch
// of watch events); a larger one is a failed read, retried with backoff.
const maxResponseBytes = 64 << 20

// newClient builds an etcd client for one connection (see loop.session).
//
// The etcd client retries on its own: unary requests up to 100 times 25 ms
// apart, watch streams every 100 ms at most, and gRPC reconnects with a
// backoff of its own. The source paces its retries itself instead: a
// request is tried once (MaxUnaryRetries 1), a lost connection ends the
// client (the loop closes it and waits its backoff before the next), and
// gRPC's own reconnection backoff starts at dial_timeout, so that within
// one connection attempt no endpoint is dialled twice. Within a
// connection that stands, a member that goes away is redialled by gRPC on
// that backoff (from dial_timeout doubling up to retry_max), while the
// watches carry on through the other members.
func (s *Source) newClient(ctx context.Context) (*clientv3.Client, error) {
	c := s.cfg
	base := max(c.RetryMin, c.DialTimeout)
	cfg := clientv3.Config{
		Endpoints:            c.Endpoints,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    c.KeepaliveTime,
		DialKeepAliveTimeout: c.KeepaliveTimeout,
		MaxCallRecvMsgSize:   maxResponseBytes,
		MaxUnaryRetries:      1,
		Logger:               zap.NewNop(),
		Context:              ctx,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: base, Multiplier: 2, Jitter: 0.2, MaxDelay: max(c.RetryMax, base)},
			MinConnectTimeout: c.DialTimeout,
		})},
	}
	if c.TLS.Set() {
		tc, err := c.TLS.Config()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	if c.Auth.User != "" {
		pw, err := filestamp.ReadToken(c.Auth.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("reading auth.password_file: %w", err)
		}
		cfg.Username, cfg.Password = c.Auth.User, pw
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", strings.Join(c.Endpoints, ","), err)
	}
	return cli, nil
}

// connect waits until the client has a connection, for dial_timeout at
// most. A connection that fails ends the wait at once, with gRPC's reason
// (refused, TLS, ...): the loop's backoff, not gRPC's, spaces the next
// attempt.
func (s *Source) connect(ctx context.Context, cli *clientv3.Client) error {
	conn := cli.ActiveConnection()
	conn.Connect()
	dctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if st == connectivity.TransientFailure || st == connectivity.Shutdown {
			// A request that does not wait for a connection fails with
			// the reason the last attempt failed, and dials nothing.
			_, err := pb.NewMaintenanceClient(conn).Status(dctx, &pb.StatusRequest{})
			if err == nil {
				continue
			}
			return fmt.Errorf("connecting to %s: %w", strings.Join(s.cfg.Endpoints, ","), err)
		}
		if !conn.WaitForStateChange(dctx, st) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("connecting to %s: no connection within dial_timeout (%s)", strings.Join(s.cfg.Endpoints, ","), s.cfg.DialTimeout)
		}
	}
	return nil
}

// connLost returns a channel closed once the client's connection leaves
// the ready state (every endpoint lost, or a keepalive unanswered); it is
// watched until ctx ends.
func connLost(ctx context.Context, conn *grpc.ClientConn) <-chan struct{} {
	lost := make(chan struct{})
	go func() {
		for st := conn.GetState(); ; st = conn.GetState() {
			if st != connectivity.Ready {
				close(lost)
				return
			}
			if !conn.WaitForStateChange(ctx, st) {
				return
			}
		}
	}()
	return lost
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
