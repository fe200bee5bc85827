package xdsserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	bridgecfg "github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/xds"
)

// commonOptions are the gRPC server options every implementation gets, so
// that none is measured with a cheaper transport than another: the
// bridge's xDS listener's at their defaults (the engine's transport limits
// and windows, bridge.TransportOptions) and the engine's codec, which for
// the other implementations is a generic request decoder; with buffers
// positive, gRPC's read and write buffers of that size; with
// keepaliveTimeout positive, that keepalive timeout instead of gRPC's (see
// Options.KeepaliveTimeout). An implementation's own serverOptions come
// after and override them.
func commonOptions(buffers int, keepaliveTimeout time.Duration) []grpc.ServerOption {
	opts := slices.Concat(xds.NewServer(xds.Options{}).GRPCOptions(), bridgecfg.TransportOptions(),
		[]grpc.ServerOption{grpc.ForceServerCodecV2(xds.Codec())})
	if buffers > 0 {
		opts = append(opts, grpc.ReadBufferSize(buffers), grpc.WriteBufferSize(buffers))
	}
	if keepaliveTimeout > 0 {
		// Time stays gRPC's default: only the timeout is the measurement's.
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{Timeout: keepaliveTimeout}))
	}
	return opts
}

// Options configure Serve.
type Options struct {
	Impl    string
	XDS     string // listen address of the xDS server, e.g. 127.0.0.1:0
	Control string // listen address of the control API
	// Holdoff, if positive, coalesces changes as the bridge's source
	// manager does (manager.Cadence): /change only records the changes,
	// and batches are applied at most once per Holdoff. Zero applies each
	// change within its /change call.
	Holdoff time.Duration
	// MaxHoldoff bounds a change's wait, so it only bounds Holdoff; zero
	// means 10 × Holdoff, as the bridge's defaults.
	MaxHoldoff time.Duration
	// Streams, if positive, replaces the engine's limit of streams open at
	// once (xds.Limits.Streams, the bridge's xds.limits.streams) for the
	// bridge's implementations: a fleet larger than the default limit
	// needs it raised, as its deployment would.
	Streams int
	// GRPCBuffers, if positive, sets the size of gRPC's read and write
	// buffers (grpc.ReadBufferSize, grpc.WriteBufferSize) for every
	// implementation alike; zero keeps the bridge's transport.
	GRPCBuffers int
	// KeepaliveTimeout, if positive, replaces gRPC's keepalive timeout (20
	// s; the bridge's xds.keepalive.timeout) for every implementation
	// alike. gRPC-Go also makes it each connection's TCP_USER_TIMEOUT, so
	// the kernel drops, without telling the client, a connection whose
	// client has kept its receive window closed or left data
	// unacknowledged that long, and resets one whose keepalive probe went
	// unanswered: a load generator that shares the server's CPUs and
	// cannot read a large fleet's initial state that fast loses clients
	// it will wait for. Zero keeps gRPC's.
	KeepaliveTimeout time.Duration
	// Ready receives one line "READY xds=ADDR control=ADDR" once both
	// listen.
	Ready  io.Writer
	Logger *slog.Logger
}

// Stats is what GET /stats reports.
type Stats struct {
	UserNs, SysNs int64 // getrusage(RUSAGE_SELF)
	RSS           int64 // VmRSS, bytes
	PeakRSS       int64 // VmHWM, bytes: the highest RSS of the process so far
	HeapInuse     uint64
	HeapAlloc     uint64
	HeapSys       uint64 // heap memory obtained from the OS
	HeapReleased  uint64 // of HeapSys, returned to the OS
	NextGC        uint64 // heap size at which the next GC starts
	StackInuse    uint64 // goroutine stacks
	Goroutines    int
	GCs           uint32 // garbage collections completed
	Changes       int    // applied
	Flushes       int    // calls to the implementation's change (one publish each)
	// Reclaim is what the process's memory return policy has done: every
	// implementation runs the bridge's (reclaim.DefaultPolicy), since it
	// is a property of the process, not of the xDS server. Only the
	// bridge's engine tells it when responses are in flight (Policy.Busy),
	// as in the bridge; the others are judged by allocation and CPU.
	Reclaim reclaim.Stats
}

// CPU is user + system time.
func (s Stats) CPU() time.Duration { return time.Duration(s.UserNs + s.SysNs) }

// Serve runs the implementation and the control API until ctx ends.
//
// Control API (all on loopback, plain HTTP):
//
//	POST /load?services=N&endpoints=E   build and apply the initial world
//	POST /change?k=K[&k=K2...]          apply changes K, K2..., in order, one
//	                                    publish each; returns when applied
//	                                    (with Holdoff: when recorded, and
//	                                    batched as any other changes)
//	GET  /stats                         Stats as JSON
//	POST /gc                            run the garbage collector
//	POST /cpuprofile/start?path=P       start a CPU profile written to P
//	POST /cpuprofile/stop
//	POST /heapprofile?path=P            write a heap profile to P
func Serve(ctx context.Context, opts Options) error {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	im, err := newImpl(ctx, opts.Impl, xds.Limits{Streams: opts.Streams}, opts.Logger)
	if err != nil {
		return err
	}
	g := grpc.NewServer(slices.Concat(commonOptions(opts.GRPCBuffers, opts.KeepaliveTimeout), im.serverOptions())...)
	im.register(g)
	xl, err := net.Listen("tcp", opts.XDS)
	if err != nil {
		return fmt.Errorf("listening for xDS: %w", err)
	}
	cl, err := net.Listen("tcp", opts.Control)
	if err != nil {
		xl.Close()
		return fmt.Errorf("listening for control: %w", err)
	}
	policy := reclaim.DefaultPolicy
	if b, ok := im.(interface{ busy() bool }); ok {
		policy.Busy = b.busy
	}
	c := &control{impl: im, log: opts.Logger, reclaim: reclaim.New(policy)}
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { c.reclaim.Run(ctx) })
	if opts.Holdoff > 0 {
		c.batch = newBatcher(opts.Holdoff, opts.MaxHoldoff, c.flush)
		wg.Go(func() { c.batch.run(ctx) })
	}
	hs := &http.Server{Handler: c.mux(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- g.Serve(xl) }()
	go func() { errc <- hs.Serve(cl) }()
	if opts.Ready != nil {
		fmt.Fprintf(opts.Ready, "READY xds=%s control=%s\n", xl.Addr(), cl.Addr())
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	_ = hs.Close()
	g.Stop()
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

type control struct {
	log   *slog.Logger
	batch *batcher // nil without holdoff
	// loaded is set once a world is loaded. /change reads it rather than
	// taking mu, which a publish in progress holds: with a holdoff,
	// recording a change must not wait for the previous batch's publish,
	// or the driver's rate would depend on the implementation's publish
	// time.
	loaded  atomic.Bool
	reclaim *reclaim.Reclaimer

	mu      sync.Mutex
	impl    impl
	world   *workload.World
	changes int
	flushes int
	prof    *os.File
}

func (c *control) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /load", c.load)
	m.HandleFunc("POST /change", c.change)
	m.HandleFunc("GET /stats", c.stats)
	m.HandleFunc("POST /gc", func(_ http.ResponseWriter, _ *http.Request) { runtime.GC(); debug.FreeOSMemory() })
	m.HandleFunc("POST /cpuprofile/start", c.cpuStart)
	m.HandleFunc("POST /cpuprofile/stop", c.cpuStop)
	m.HandleFunc("POST /heapprofile", heapProfile)
	return m
}

func intParam(r *http.Request, name string) (int, error) {
	v, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %w", name, err)
	}
	return v, nil
}

// changeParams returns the change numbers of a /change request: one k
// parameter or more. A driver at a high rate sends several in one call,
// so that the rate it can offer does not depend on one HTTP round trip
// per change.
func changeParams(r *http.Request) ([]int, error) {
	vs := r.URL.Query()["k"]
	if len(vs) == 0 {
		return nil, errors.New("parameter k: missing")
	}
	ks := make([]int, len(vs))
	for i, v := range vs {
		k, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("parameter k: %w", err)
		}
		ks[i] = k
	}
	return ks, nil
}

func (c *control) load(w http.ResponseWriter, r *http.Request) {
	n, err := intParam(r, "services")
	e, err2 := intParam(r, "endpoints")
	if err = errors.Join(err, err2); err == nil {
		spec := workload.Spec{Services: n, Endpoints: e}
		if err = spec.Validate(); err == nil {
			c.mu.Lock()
			c.world = workload.NewWorld(spec)
			err = c.impl.load(c.world)
			c.loaded.Store(err == nil)
			c.mu.Unlock()
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

func (c *control) change(w http.ResponseWriter, r *http.Request) {
	ks, err := changeParams(r)
	if err == nil {
		switch {
		case !c.loaded.Load():
			err = errors.New("no workload loaded")
		case c.batch != nil:
			c.batch.add(ks...)
		default:
			for _, k := range ks {
				if err = c.apply([]int{k}); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// apply hands changes ks to the implementation as one publish.
func (c *control) apply(ks []int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.impl.change(c.world, ks); err != nil {
		return fmt.Errorf("applying %d changes: %w", len(ks), err)
	}
	c.changes += len(ks)
	c.flushes++
	return nil
}

// flush applies a coalesced batch. Nobody waits for it, so a failure is
// logged; the load generator then sees the changes never converge.
func (c *control) flush(ks []int) {
	if err := c.apply(ks); err != nil {
		c.log.Error("flushing changes", "err", err)
	}
}

func (c *control) stats(w http.ResponseWriter, _ *http.Request) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c.mu.Lock()
	s := Stats{
		UserNs:     ru.Utime.Nano(),
		SysNs:      ru.Stime.Nano(),
		RSS:        rss(),
		PeakRSS:    PeakRSS(),
		HeapInuse:  ms.HeapInuse,
		HeapAlloc:  ms.HeapAlloc,
		Goroutines: runtime.NumGoroutine(),
		GCs:        ms.NumGC,
		Changes:    c.changes,
		Flushes:    c.flushes,
		Reclaim:    c.reclaim.Stats(),
	}
	s.HeapSys, s.HeapReleased, s.NextGC, s.StackInuse = ms.HeapSys, ms.HeapReleased, ms.NextGC, ms.StackInuse
	c.mu.Unlock()
	_ = json.NewEncoder(w).Encode(s)
}

func (c *control) cpuStart(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prof != nil {
		http.Error(w, "profile already running", http.StatusConflict)
		return
	}
	f, err := os.Create(r.URL.Query().Get("path"))
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.prof = f
}

func (c *control) cpuStop(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prof == nil {
		return
	}
	pprof.StopCPUProfile()
	if err := c.prof.Close(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
	c.prof = nil
}

func heapProfile(w http.ResponseWriter, r *http.Request) {
	f, err := os.Create(r.URL.Query().Get("path"))
	if err == nil {
		err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// PeakRSS reads VmHWM of this process from /proc (0 where unavailable):
// the peak a container's memory limit would have had to allow, since the
// process started or since ResetPeakRSS.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscan(rest, &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// ResetPeakRSS sets this process's VmHWM to its current RSS (Linux
// clear_refs; a no-op where unavailable), so that PeakRSS tells the peak of
// what follows.
func ResetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// rss reads VmRSS of this process from /proc (0 where unavailable).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	if _, err := fmt.Sscan(string(b), &size, &res); err != nil {
		return 0
	}
	return res * int64(os.Getpagesize())
}
