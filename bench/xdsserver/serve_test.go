package xdsserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs Serve in the background and returns its addresses.
func serve(t *testing.T, impl string, holdoff time.Duration) (xdsAddr, control string) {
	t.Helper()
	return serveOpts(t, Options{Impl: impl, Holdoff: holdoff})
}

// serveOpts runs Serve with opts on loopback ports in the background and
// returns its addresses.
func serveOpts(t *testing.T, opts Options) (xdsAddr, control string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	opts.XDS, opts.Control, opts.Ready = "127.0.0.1:0", "127.0.0.1:0", pw
	go func() { done <- Serve(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() { pw.Close() })
	for _, f := range strings.Fields(line)[1:] {
		k, v, _ := strings.Cut(f, "=")
		if k == "xds" {
			xdsAddr = v
		} else {
			control = v
		}
	}
	return xdsAddr, control
}

func post(t *testing.T, control, path string) {
	t.Helper()
	resp, err := http.Post("http://"+control+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s %s", path, resp.Status, body)
	}
}

// TestImplsServeTheWorkload checks each implementation end to end: the
// initial world, then a change, reach an Envoy-like client intact.
func TestImplsServeTheWorkload(t *testing.T) {
	spec := workload.Spec{Services: 20, Endpoints: 3}
	for _, impl := range append(Impls, "xdsbridge-stdcodec") {
		for _, delta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/delta=%v", impl, delta), func(t *testing.T) {
				xdsAddr, control := serve(t, impl, 0)
				post(t, control, fmt.Sprintf("/load?services=%d&endpoints=%d", spec.Services, spec.Endpoints))
				ctx, c := startClient(t, xdsAddr, delta)
				w := workload.NewWorld(spec)
				for _, k := range []int{0, 1, 2} {
					if k > 0 {
						w.Apply(k)
						post(t, control, fmt.Sprintf("/change?k=%d", k))
					}
					if err := waitWorld(ctx, c, w); err != nil {
						t.Fatalf("after change %d: %v", k, err)
					}
				}
			})
		}
	}
}

// TestFloorServesChanges checks the floor in both protocols: a client
// connected at load and one connected after a change (whose initial state
// must be encoded anew) both follow every change to the world's state, and
// both get exactly one response per change once they hold the world.
func TestFloorServesChanges(t *testing.T) {
	spec := workload.Spec{Services: 20, Endpoints: 3}
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			xdsAddr, control := serve(t, "floor", 0)
			post(t, control, fmt.Sprintf("/load?services=%d&endpoints=%d", spec.Services, spec.Endpoints))
			w := workload.NewWorld(spec)
			ctx, early := startClient(t, xdsAddr, delta)
			if err := waitWorld(ctx, early, w); err != nil {
				t.Fatalf("initial world: %v", err)
			}
			w.Apply(1)
			post(t, control, "/change?k=1")
			_, late := startClient(t, xdsAddr, delta)
			clients := []*envoysim.Client{early, late}
			for _, c := range clients {
				if err := waitWorld(ctx, c, w); err != nil {
					t.Fatalf("after change 1: %v", err)
				}
			}
			before := []int64{early.Stats().Responses, late.Stats().Responses}
			for _, k := range []int{2, 3} {
				w.Apply(k)
				post(t, control, fmt.Sprintf("/change?k=%d", k))
			}
			for i, c := range clients {
				if err := waitWorld(ctx, c, w); err != nil {
					t.Fatalf("client %d after changes 2 and 3: %v", i, err)
				}
				if got := c.Stats().Responses - before[i]; got != 2 {
					t.Errorf("client %d got %d responses for 2 changes", i, got)
				}
			}
		})
	}
}

// TestGRPCBuffers checks that a buffer size adds gRPC's read and write
// buffer options to the ones every implementation gets, and none without
// one, and that a server started with buffers far smaller than one
// response still delivers the world intact.
func TestGRPCBuffers(t *testing.T) {
	if got, want := len(commonOptions(4096, 0)), len(commonOptions(0, 0))+2; got != want {
		t.Fatalf("commonOptions(4096, 0) has %d options, want %d", got, want)
	}
	spec := workload.Spec{Services: 20, Endpoints: 3}
	xdsAddr, control := serveOpts(t, Options{Impl: "xdsbridge", GRPCBuffers: 256})
	post(t, control, fmt.Sprintf("/load?services=%d&endpoints=%d", spec.Services, spec.Endpoints))
	ctx, c := startClient(t, xdsAddr, true)
	if err := waitWorld(ctx, c, workload.NewWorld(spec)); err != nil {
		t.Fatal(err)
	}
}

// TestStreamsLimitReachesTheEngine checks that Options.Streams is the
// bridge's limit of streams open at once: with a limit of one, the first
// client is served and the second client's stream is refused.
func TestStreamsLimitReachesTheEngine(t *testing.T) {
	spec := workload.Spec{Services: 5, Endpoints: 2}
	xdsAddr, control := serveOpts(t, Options{Impl: "xdsbridge", Streams: 1})
	post(t, control, fmt.Sprintf("/load?services=%d&endpoints=%d", spec.Services, spec.Endpoints))
	ctx, first := startClient(t, xdsAddr, true)
	if err := waitWorld(ctx, first, workload.NewWorld(spec)); err != nil {
		t.Fatalf("first client: %v", err)
	}
	// The refusal can end the stream before the client's first request
	// goes out (Start fails) or after it (the stream ends).
	second, err := envoysim.Start(ctx, envoysim.Options{Addr: xdsAddr, Delta: true})
	if err == nil {
		t.Cleanup(second.Close)
		err = second.WaitFor(ctx, func(envoysim.State) bool { return false })
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second client's stream: %v, want it refused with ResourceExhausted", err)
	}
}

// startClient connects an Envoy-like client for the test, closed with it;
// ctx bounds the test's waits.
func startClient(t *testing.T, addr string, delta bool) (context.Context, *envoysim.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	c, err := envoysim.Start(ctx, envoysim.Options{Addr: addr, Delta: delta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return ctx, c
}

// waitWorld waits until client c holds every service of w as it is now.
func waitWorld(ctx context.Context, c *envoysim.Client, w *workload.World) error {
	want := map[string]uint64{}
	for i := range w.Spec.Services {
		r, err := w.Spec.Build(i, w.Last(i))
		if err != nil {
			return err
		}
		if want[workload.Name(i)], err = envoysim.Hash(r.Assignment); err != nil {
			return err
		}
	}
	return c.WaitFor(ctx, func(s envoysim.State) bool {
		if len(s.Clusters) != w.Spec.Services {
			return false
		}
		for name, h := range want {
			if s.Hashes[envoysim.EndpointType][name] != h {
				return false
			}
		}
		return true
	})
}

// TestHoldoffCoalesces checks that with a holdoff a burst of changes is
// applied in fewer publishes than changes, by every implementation, and
// that the client still ends up with the world's final state (a service
// changed twice in one batch must carry its later change). The burst is
// posted one, two or three changes per call, as the driver does at high
// rates.
func TestHoldoffCoalesces(t *testing.T) {
	spec := workload.Spec{Services: 20, Endpoints: 3}
	const burst = 30 // more than Services: some services change twice
	for _, impl := range Impls {
		t.Run(impl, func(t *testing.T) {
			xdsAddr, control := serve(t, impl, 200*time.Millisecond)
			post(t, control, fmt.Sprintf("/load?services=%d&endpoints=%d", spec.Services, spec.Endpoints))
			ctx, c := startClient(t, xdsAddr, true)
			w := workload.NewWorld(spec)
			if err := waitWorld(ctx, c, w); err != nil {
				t.Fatalf("initial world: %v", err)
			}
			for k, n := 1, 1; k <= burst; k, n = k+n, n%3+1 {
				q := url.Values{}
				for j := k; j < k+n && j <= burst; j++ {
					w.Apply(j)
					q.Add("k", strconv.Itoa(j))
				}
				post(t, control, "/change?"+q.Encode())
			}
			if err := waitWorld(ctx, c, w); err != nil {
				t.Fatalf("after the burst: %v", err)
			}
			s := stats(t, control)
			if s.Changes != burst || s.Flushes < 1 || s.Flushes >= burst/2 {
				t.Errorf("%d changes applied in %d flushes, want %d in a few", s.Changes, s.Flushes, burst)
			}
		})
	}
}

func stats(t *testing.T, control string) Stats {
	t.Helper()
	resp, err := http.Get("http://" + control + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s Stats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestControlAPI(t *testing.T) {
	_, control := serve(t, "snapshot", 0)
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"change before load", "/change?k=1", http.StatusBadRequest},
		{"bad load", "/load?services=x&endpoints=1", http.StatusBadRequest},
		{"empty load", "/load?services=0&endpoints=1", http.StatusBadRequest},
		{"load", "/load?services=3&endpoints=1", http.StatusOK},
		{"change", "/change?k=1", http.StatusOK},
		{"several changes", "/change?k=2&k=3", http.StatusOK},
		{"no change number", "/change", http.StatusBadRequest},
		{"bad change number", "/change?k=2&k=x", http.StatusBadRequest},
		{"gc", "/gc", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post("http://"+control+tc.path, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	// Without holdoff each change of a call is its own publish.
	if s := stats(t, control); s.Changes != 3 || s.Flushes != 3 || s.CPU() <= 0 || s.RSS <= 0 || s.HeapInuse == 0 {
		t.Errorf("stats = %+v", s)
	}
}

// TestSnapshotPerTypeVersions checks the SnapshotCache baseline: with
// per-type versions an endpoint change leaves the CDS version alone (no
// CDS re-send), while the naive variant moves it on every change.
func TestSnapshotPerTypeVersions(t *testing.T) {
	spec := workload.Spec{Services: 5, Endpoints: 2}
	for _, perType := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		s := newSnapshot(ctx, perType)
		w := workload.NewWorld(spec)
		if err := s.load(w); err != nil {
			t.Fatal(err)
		}
		versions := func() (string, string) {
			snap, err := s.cache.GetSnapshot("fleet")
			if err != nil {
				t.Fatal(err)
			}
			return snap.GetVersion(resourcev3.ClusterType), snap.GetVersion(resourcev3.EndpointType)
		}
		c0, e0 := versions()
		if err := s.change(w, []int{1}); err != nil {
			t.Fatal(err)
		}
		c1, e1 := versions()
		if e1 == e0 {
			t.Errorf("perType=%v: EDS version unchanged by an endpoint change", perType)
		}
		if (c1 == c0) != perType {
			t.Errorf("perType=%v: CDS version %s -> %s after an endpoint change", perType, c0, c1)
		}
		cancel()
	}
}

// TestResetPeakRSS checks that the peak RSS can be reset to what the
// process holds now: 64 MB touched and returned no longer count.
func TestResetPeakRSS(t *testing.T) {
	if PeakRSS() == 0 {
		t.Skip("no VmHWM here")
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	high := PeakRSS()
	b = nil //nolint:ineffassign // says where the test lets go of it, before it checks the memory is freed
	debug.FreeOSMemory()
	ResetPeakRSS()
	if after := PeakRSS(); after > high-32<<20 {
		t.Errorf("peak RSS %d after the reset, %d before it with 64 MB more", after, high)
	}
}
