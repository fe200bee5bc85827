package xdsserver

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/testwait"
)

// TestKeepaliveTimeout checks that a server's accepted connections carry
// the keepalive timeout as their TCP_USER_TIMEOUT: gRPC's 20 s without
// one, the given one with it. The kernel acts on that socket option, not
// on gRPC's setting, which is why the benchmark's large fleets need it.
func TestKeepaliveTimeout(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		want    int // milliseconds
	}{{0, 20_000}, {10 * time.Minute, 600_000}} {
		t.Run(fmt.Sprint(tc.timeout), func(t *testing.T) {
			xdsAddr, control := serveOpts(t, Options{Impl: "xdsbridge", KeepaliveTimeout: tc.timeout})
			spec := workload.Spec{Services: 2, Endpoints: 1}
			post(t, control, fmt.Sprintf("/load?services=%d&endpoints=%d", spec.Services, spec.Endpoints))
			ctx, c := startClient(t, xdsAddr, true)
			if err := waitWorld(ctx, c, workload.NewWorld(spec)); err != nil {
				t.Fatal(err)
			}
			_, port, err := net.SplitHostPort(xdsAddr)
			if err != nil {
				t.Fatal(err)
			}
			p, err := strconv.Atoi(port)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			testwait.Eventually(t, testwait.Patience, "the server's end of the client's connection", func() bool {
				got = acceptedUserTimeouts(t, p)
				return len(got) > 0
			})
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("TCP_USER_TIMEOUT of the server's connections: %v ms, want [%d]", got, tc.want)
			}
		})
	}
}

// acceptedUserTimeouts returns the TCP_USER_TIMEOUT, in milliseconds, of
// every connected socket of this process whose local port is port: the
// server's ends of its clients' connections (the clients' ends have the
// port as their peer's, the listener has no peer).
func acceptedUserTimeouts(t *testing.T, port int) []int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// A descriptor closed or reused since the listing fails one of
		// these calls or is not a TCP socket on port; either way it is
		// skipped.
		local, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		if a, ok := local.(*unix.SockaddrInet4); !ok || a.Port != port {
			continue
		}
		if _, err := unix.Getpeername(fd); err != nil {
			continue
		}
		ms, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		if err != nil {
			continue
		}
		out = append(out, ms)
	}
	return out
}
