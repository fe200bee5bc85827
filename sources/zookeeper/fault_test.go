package zookeeper_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/countproxy"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/test/zktest"
)

// emptied counts the EDS responses in which the client received one of
// the watched clusters without endpoints, or lost it: what a mass removal
// that got through would show.
func emptied(c *envoysim.Client, clusters []string) int {
	st := c.State()
	n := 0
	for _, name := range clusters {
		if st.Clusters[name] == nil || len(eps(st.Assignments[name])) == 0 {
			n++
		}
	}
	return n
}

// TestRegistrarSessionExpiry: a registrar's session expires (its network
// cut for longer than its session timeout), so every instance it
// registered vanishes at once. The source reports that in one update, the
// default removal guard holds it, the client keeps every endpoint, and
// the hold ends when the registrar re-registers on a new session.
func TestRegistrarSessionExpiry(t *testing.T) {
	srv := zktest.Start(t)
	r := zktest.NewRegistrar(t, srv.Addr, time.Second)
	var clusters []string
	for i := range 6 {
		c := fmt.Sprintf("svc-%d", i)
		clusters = append(clusters, c)
		r.Curator("/services", c, "id-0", addr(i), 8000)
	}
	f := startBridge(t, srv.Addr, "{path: /services, format: curator}", "")
	for i, c := range clusters {
		f.wait(t, c, []ep{{addr(i), 8000, 1}})
	}
	var darkSeen atomic.Int64
	stop := make(chan struct{})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				darkSeen.Add(int64(emptied(f.client, clusters)))
			}
		}
	}()

	r.Cut()
	admin := f.in.AdminAddr().String()
	bridgetest.Eventually(t, bridgetest.Patience, "the removal guard to hold the expired session's removals", func() bool {
		st := bridgetest.SourceStatus(t, admin, "zk")
		return st.Guard != nil && st.GuardHolds == 1
	})
	if st := bridgetest.SourceStatus(t, admin, "zk"); st.Stale {
		t.Fatalf("the bridge's own session is fine, yet the source is stale: %+v", st)
	}
	r.Restore()
	r.Reregister()
	bridgetest.Eventually(t, bridgetest.Patience, "the hold to end once the registrar re-registered", func() bool {
		return bridgetest.SourceStatus(t, admin, "zk").Guard == nil
	})
	for i, c := range clusters {
		f.wait(t, c, []ep{{addr(i), 8000, 1}})
	}
	close(stop)
	<-watching
	if n := darkSeen.Load(); n != 0 {
		t.Fatalf("the client saw a service without endpoints %d times during the expiry", n)
	}
	if st := bridgetest.SourceStatus(t, admin, "zk"); st.GuardHolds != 1 {
		t.Fatalf("guard holds %d, want 1", st.GuardHolds)
	}
}

// TestServerRestart: ZooKeeper stops. The bridge keeps serving the last
// state (fail-static), shows the source stale, reconnects no faster than
// its backoff allows and logs the outage a bounded number of times; the
// server back, the session resumes, and the state is resynced with
// nothing lost and nothing duplicated, and watched again.
func TestServerRestart(t *testing.T) {
	srv := zktest.Start(t)
	proxy, err := countproxy.TCP(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	r := zktest.NewRegistrar(t, srv.Addr, 60*time.Second)
	for i := range 3 {
		r.Serverset("/ss/web", zktest.Endpoint{Host: addr(i), Port: 8000}, nil, "ALIVE", i)
	}
	f := startBridge(t, proxy.Addr, "{path: /ss/web, format: serverset}", "")
	want := []ep{{addr(0), 8000, 1}, {addr(1), 8000, 1}, {addr(2), 8000, 1}}
	f.wait(t, "web", want)
	admin := f.in.AdminAddr().String()

	before := proxy.Counts().Conns
	stopped := time.Now()
	srv.Stop()
	proxy.Cut()
	bridgetest.Eventually(t, bridgetest.Patience, "the source to show stale", func() bool {
		return bridgetest.SourceStatus(t, admin, "zk").Stale
	})
	// Let the reconnects run a while, then bound them: every attempt after
	// the first waits at least the library's second per round of servers
	// (and the backoff on top), so at most one attempt a second plus the
	// first. A loaded machine makes fewer, never more.
	bridgetest.Eventually(t, bridgetest.Patience, "a few reconnect attempts", func() bool {
		return proxy.Counts().Conns-before >= 3
	})
	attempts, outage := proxy.Counts().Conns-before, time.Since(stopped)
	if limit := 2 + int64(outage/time.Second); attempts > limit {
		t.Fatalf("%d connection attempts in %s of outage, want at most %d", attempts, outage.Round(time.Millisecond), limit)
	}
	f.wait(t, "web", want) // fail-static
	if n := strings.Count(f.log.String(), "zookeeper unreachable or failing"); n < 1 || n > 1+int(outage/time.Minute)+1 {
		t.Fatalf("the outage was logged %d times in %s", n, outage)
	}
	t.Logf("%d attempts in %s of outage", attempts, outage.Round(time.Millisecond))

	srv.Restart()
	bridgetest.Eventually(t, bridgetest.Patience, "the source to recover", func() bool {
		st := bridgetest.SourceStatus(t, admin, "zk")
		return !st.Stale && st.Synced
	})
	if !strings.Contains(f.log.String(), "zookeeper reads recovered") {
		t.Fatal("the recovery was not logged")
	}
	f.wait(t, "web", want) // nothing lost, nothing duplicated
	r.Serverset("/ss/web", zktest.Endpoint{Host: addr(3), Port: 8000}, nil, "ALIVE", 3)
	f.wait(t, "web", append(want, ep{addr(3), 8000, 1})) // and watched again
}

// TestCuratorToGRPC: grpc-go's own xDS client balances RPCs over the
// instances a Curator registrar registered, and stops sending to one
// that deregisters.
func TestCuratorToGRPC(t *testing.T) {
	srv := zktest.Start(t)
	r := zktest.NewRegistrar(t, srv.Addr, 10*time.Second)
	addrs, ports := grpcxdstest.Backends(t, 2)
	var znodes []string
	for i, p := range ports {
		znodes = append(znodes, r.Curator("/services", "greeter", fmt.Sprint("id-", i), "127.0.0.1", int(p)))
	}
	f := startBridge(t, srv.Addr, "{path: /services, format: curator}", "")
	bridgetest.WaitReady(t, f.in.AdminAddr().String(), bridgetest.Patience)
	client := grpcxdstest.Dial(t, f.in.XDSAddr().String(), "zk-test", "greeter")
	ctx, cancel := context.WithTimeout(t.Context(), 2*bridgetest.Patience)
	defer cancel()
	bridgetest.Eventually(t, bridgetest.Patience, "RPCs to reach both instances", func() bool {
		hits := client.Hits(ctx, 20)
		return hits[addrs[0]] > 0 && hits[addrs[1]] > 0
	})
	r.Delete(znodes[0])
	bridgetest.Eventually(t, bridgetest.Patience, "RPCs to reach only the instance left", func() bool {
		hits := client.Hits(ctx, 20)
		return hits[addrs[0]] == 0 && hits[addrs[1]] == 20
	})
}
