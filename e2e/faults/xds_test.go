package faults

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// xdsServices is how many services the xDS fault tests serve: enough that
// a client's first response does not fit in an HTTP/2 flow-control window,
// so that a stream that never reads really holds the bridge's writes back.
const xdsServices = 2000

// writeServices writes a services file of n services (svc-0000...), each
// with one endpoint on port, and returns what a client should hold.
func writeServices(t *testing.T, path string, n, port int) view {
	t.Helper()
	var b strings.Builder
	want := view{}
	b.WriteString("services:\n")
	for i := range n {
		addr := fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
		fmt.Fprintf(&b, "  - name: svc-%04d\n    endpoints: [{address: %s, port: %d}]\n", i, addr, port)
		want[fmt.Sprintf("svc-%04d", i)] = []string{fmt.Sprintf("%s:%d", addr, port)}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestXDSClientFaults: xDS clients misbehave four ways against one
// bridge: they connect and disconnect in a loop, open streams that never
// read, subscribe to 10,000 names that do not exist, and send garbage
// bytes. Meanwhile a well-behaved watcher keeps everything it holds and
// receives a registry change; afterwards the bridge's goroutines and heap
// are back where they were.
func TestXDSClientFaults(t *testing.T) { //nolint:tparallel // its subtests are the steps of one fault, in order; the test runs beside the other faults
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "services.yaml")
	want := writeServices(t, path, xdsServices, 80)
	b := startBridge(t, dir, fmt.Sprintf("  - {name: file, type: file, path: %s, poll_interval: 1s}\n", path), bridgeOptions{})
	w := startWatcher(t, b.xds)
	w.waitHolds(fmt.Sprintf("%d services", xdsServices), want)
	b.baseline()
	// change adds a service to the registry; the watcher must receive
	// it whatever the other clients do.
	n := xdsServices
	change := func() {
		t.Helper()
		n++
		want = writeServices(t, path, n, 80)
		w.waitHolds(fmt.Sprintf("%d services", n), want)
	}
	// heapDuring bounds the bridge's live heap while misbehaving clients
	// are connected: what they cost is bounded by the bridge's limits,
	// not by what they do.
	heapDuring := func(what string, limit int64) {
		t.Helper()
		if h := b.heap(); h > b.baseHeap+limit {
			t.Errorf("%s: live heap %d MiB, more than %d MiB over the %d MiB at rest", what, h>>20, limit>>20, b.baseHeap>>20)
		}
	}

	t.Run("connect and disconnect in a loop", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		w.guard()
		const workers, cycles = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for k := range workers {
			wg.Go(func() {
				for i := range cycles {
					ctx, cancel := context.WithTimeout(context.Background(), patience)
					c, err := envoysim.Start(ctx, envoysim.Options{Addr: b.xds, Node: fmt.Sprintf("churn-%d-%d", k, i),
						Delta: i%2 == 0, Light: true})
					if err == nil {
						// Most leave at once, some once they hold the clusters.
						if i%4 == 0 {
							err = c.WaitFor(ctx, func(s envoysim.State) bool { return len(s.Clusters) == xdsServices })
						}
						c.Close()
					}
					cancel()
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("a churning client: %v", err)
		}
		change()
		w.release()
		b.settled()
	})

	t.Run("streams that never read", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		w.guard()
		const stalled = 20
		var conns []*grpc.ClientConn
		for i := range stalled {
			// A fixed window (no bandwidth estimation that would grow it):
			// the bridge can send a stream that never reads 64 KiB, no more.
			conn, err := grpc.NewClient(b.xds, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
			s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// Subscribe to every cluster, then never receive.
			if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprintf("stalled-%d", i)},
				TypeUrl: envoysim.ClusterType}); err != nil {
				t.Fatal(err)
			}
		}
		change()
		change()
		heapDuring("20 streams that never read", 64<<20)
		for _, c := range conns {
			c.Close()
		}
		w.release()
		b.settled()
	})

	t.Run("10,000 names", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		w.guard()
		names := make([]string, 10000)
		for i := range names {
			names[i] = fmt.Sprintf("nosuch-%05d", i)
		}
		var clients []*envoysim.Client
		for i, delta := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			c, err := envoysim.Start(ctx, envoysim.Options{Addr: b.xds, Node: fmt.Sprintf("names-%d", i), Delta: delta,
				Clusters: names, Light: true})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		change()
		heapDuring("two clients asking for 10,000 names each", 64<<20)
		for _, c := range clients {
			c.Close()
		}
		w.release()
		b.settled()
	})

	t.Run("garbage bytes", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		w.guard()
		preface := "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
		inputs := []string{"", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", preface, preface + "\x00\x00\x04\x08\x00\x00\x00\x00\x00"}
		var wg sync.WaitGroup
		for i := range 40 {
			junk := make([]byte, 4096)
			_, _ = rand.Read(junk)
			msg := inputs[i%len(inputs)] + string(junk)
			wg.Go(func() {
				c, err := net.Dial("tcp", b.xds)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(patience))
				_, _ = c.Write([]byte(msg))
				// The bridge must end the connection: reading reaches EOF
				// (or a reset), not the deadline.
				if _, err := io.Copy(io.Discard, c); err != nil && os.IsTimeout(err) {
					t.Errorf("the bridge kept a connection that sent garbage open for %s", patience)
				}
			})
		}
		wg.Wait()
		change()
		w.release()
		b.settled()
	})
}
