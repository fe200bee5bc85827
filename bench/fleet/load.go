package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// Load is C light envoysim clients in this process, with the bookkeeping
// that turns their responses into convergence times.
type Load struct {
	spec    workload.Spec
	Clients []*envoysim.Client

	// served[i] is when client i first held every cluster and assignment
	// (UnixNano; 0 = not yet); servedDone closes when all have.
	served     []atomic.Int64
	servedN    atomic.Int64
	servedDone chan struct{}

	// pending holds the changes in flight by the name of the assignment
	// a response must carry for the change to be held; "" for changes
	// that any EDS response may complete.
	mu      sync.RWMutex
	pending map[string]map[*Change]struct{}
}

// Change is one change in flight.
type Change struct {
	K     int
	name  string                      // see fleet.pending
	match func(*envoysim.Client) bool // whether a client holds the change
	t0    time.Time
	at    []atomic.Int64 // per client: latency in ns (0 = not yet)
	n     atomic.Int64
	done  chan struct{}
}

// LoadOptions configure a Load: the clients it starts against Addr and
// the workload they expect.
type LoadOptions struct {
	Addr     string
	Spec     workload.Spec
	Clients  int
	Delta    bool
	Prefix   string                         // node id prefix
	Full     bool                           // keep protos (not Light)
	Versions []map[string]map[string]string // per client InitialVersions (delta reconnect)
	Hashes   []map[string]map[string]uint64 // per client InitialHashes
}

// StartLoad starts every client at once and returns when all streams are
// open; use waitServed to wait until all hold the whole world.
func StartLoad(ctx context.Context, o LoadOptions) (*Load, error) {
	f := &Load{
		spec:       o.Spec,
		Clients:    make([]*envoysim.Client, o.Clients),
		served:     make([]atomic.Int64, o.Clients),
		servedDone: make(chan struct{}),
		pending:    map[string]map[*Change]struct{}{},
	}
	errs := make([]error, o.Clients)
	// The clients hold the same names and versions: kept once for the
	// fleet, they are not what limits its size.
	intern := envoysim.NewInterner()
	var wg sync.WaitGroup
	for i := range o.Clients {
		wg.Go(func() {
			opts := envoysim.Options{
				Addr:       o.Addr,
				Node:       fmt.Sprintf("%s-%05d", o.Prefix, i),
				Delta:      o.Delta,
				Light:      !o.Full,
				Intern:     intern,
				OnResponse: func(c *envoysim.Client, r envoysim.Received) { f.onResponse(i, c, r) },
				// A connection attempt that fails (1,000 clients dialling a
				// busy server on a loaded machine time out now and then) is
				// retried with gRPC's backoff, as an Envoy retries, rather
				// than failing the run; the retry counts in the time.
				// The connections share write buffers (gRPC's default), as the server's do:
				// one each would be 32 KB per client of the load
				// generator's memory, which at 20,000 clients sits beside
				// the server's on the same machine.
				DialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.WaitForReady(true))},
			}
			if o.Versions != nil {
				opts.InitialVersions = o.Versions[i]
				opts.InitialHashes = o.Hashes[i]
			}
			c, err := envoysim.Start(ctx, opts)
			if err != nil {
				errs[i] = err
				return
			}
			f.Clients[i] = c
			f.checkServed(i, c) // a reconnect may hold everything already
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting fleet: %w", err)
	}
	return f, nil
}

// Close closes every client.
func (f *Load) Close() {
	var wg sync.WaitGroup
	for _, c := range f.Clients {
		if c != nil {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
}

func (f *Load) checkServed(i int, c *envoysim.Client) {
	if f.served[i].Load() != 0 {
		return
	}
	if c.Len(envoysim.ClusterType) != f.spec.Services || c.Len(envoysim.EndpointType) != f.spec.Services {
		return
	}
	if f.served[i].CompareAndSwap(0, time.Now().UnixNano()) && f.servedN.Add(1) == int64(len(f.served)) {
		close(f.servedDone)
	}
}

func (f *Load) onResponse(i int, c *envoysim.Client, r envoysim.Received) {
	f.checkServed(i, c)
	if r.TypeURL != envoysim.EndpointType || r.NACKed {
		return
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	// A change can be completed only by a response that carries its
	// assignment: at high rates hundreds of changes are in flight, and
	// checking each against every response of every client would cost the
	// fleet more CPU than the server it measures. A SotW response names
	// every assignment; then the walk over what is in flight is shorter.
	if len(r.Names) < len(f.pending) {
		for _, name := range r.Names {
			f.check(f.pending[name], i, c, r.Time)
		}
	} else {
		for name, ts := range f.pending {
			if name != "" {
				f.check(ts, i, c, r.Time)
			}
		}
	}
	f.check(f.pending[""], i, c, r.Time)
}

// check records client i's latency for the changes of ts it now holds.
func (f *Load) check(ts map[*Change]struct{}, i int, c *envoysim.Client, at time.Time) {
	for t := range ts {
		if t.at[i].Load() != 0 || !t.match(c) {
			continue
		}
		lat := max(at.Sub(t.t0), 1)
		if t.at[i].CompareAndSwap(0, int64(lat)) && t.n.Add(1) == int64(len(t.at)) {
			close(t.done)
		}
	}
}

// WaitServed waits until every client holds the whole world and returns
// when the last one did. It gives up after timeout, and as soon as a
// client not yet served has lost its stream: the clients do not reconnect,
// so that one would never be served. Its error then says how many were
// served and why the unserved clients' streams ended (lostStreams).
func (f *Load) WaitServed(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// Polled: the clients report responses, not the end of their streams.
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		var err error
		select {
		case <-f.servedDone:
			var last int64
			for i := range f.served {
				last = max(last, f.served[i].Load())
			}
			return time.Unix(0, last), nil
		case <-deadline.C:
			err = errDeadline
		case <-ctx.Done():
			err = ctx.Err()
		case <-poll.C:
			if f.lostStreams() == "" {
				continue
			}
			err = errStreamLost
		}
		return time.Time{}, fmt.Errorf("%d of %d clients served%s: %w", f.servedN.Load(), len(f.served), f.lostStreams(), err)
	}
}

// errDeadline marks a cold start that did not complete in time.
var errDeadline = errors.New("timed out")

// errStreamLost marks a cold start that cannot complete: a client not yet
// served lost its stream.
var errStreamLost = errors.New("a client's stream ended before it was served")

// addrPattern matches the IPv4 addresses and ports in a stream's error,
// which differ from client to client.
var addrPattern = regexp.MustCompile(`\d{1,3}(\.\d{1,3}){3}:\d+`)

// lostStreams counts the clients not yet served whose streams have ended,
// by the reason their stream gave, addresses left out so that the reasons
// group: "; 3 streams lost (2: REASON; 1: REASON)", the most frequent
// reasons first, at most three of them; "" when none has.
func (f *Load) lostStreams() string {
	by := map[string]int{}
	n := 0
	for i, c := range f.Clients {
		if c == nil || f.served[i].Load() != 0 {
			continue
		}
		if err := c.Err(); err != nil {
			by[addrPattern.ReplaceAllString(err.Error(), "ADDR")]++
			n++
		}
	}
	if n == 0 {
		return ""
	}
	reasons := slices.SortedFunc(maps.Keys(by), func(a, b string) int {
		return cmp.Or(cmp.Compare(by[b], by[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, 3)
	for _, r := range reasons[:min(len(reasons), 3)] {
		parts = append(parts, fmt.Sprintf("%d: %s", by[r], r))
	}
	return fmt.Sprintf("; %d streams lost (%s)", n, strings.Join(parts, "; "))
}

// Holds matches a client holding an assignment with the given hash.
func Holds(name string, hash uint64) func(*envoysim.Client) bool {
	return func(c *envoysim.Client) bool {
		h, _, ok := c.Hash(envoysim.EndpointType, name)
		return ok && h == hash
	}
}

// Track registers change k as in flight from now on: it is held by a
// client for which match reports true after a response that carries
// assignment name ("" if the change may show in any EDS response).
func (f *Load) Track(k int, name string, match func(*envoysim.Client) bool) *Change {
	t := &Change{K: k, name: name, match: match, at: make([]atomic.Int64, len(f.Clients)), done: make(chan struct{}), t0: time.Now()}
	f.mu.Lock()
	ts := f.pending[name]
	if ts == nil {
		ts = map[*Change]struct{}{}
		f.pending[name] = ts
	}
	ts[t] = struct{}{}
	f.mu.Unlock()
	return t
}

// Untrack stops following change t.
func (f *Load) Untrack(t *Change) {
	f.mu.Lock()
	if ts := f.pending[t.name]; ts != nil {
		delete(ts, t)
		if len(ts) == 0 {
			delete(f.pending, t.name)
		}
	}
	f.mu.Unlock()
}

// Latencies returns the per-client latencies of a change and whether every
// client got it.
func (t *Change) Latencies() ([]time.Duration, bool) {
	out := make([]time.Duration, 0, len(t.at))
	for i := range t.at {
		if v := t.at[i].Load(); v != 0 {
			out = append(out, time.Duration(v))
		}
	}
	return out, len(out) == len(t.at)
}

// Stats sums the clients' counters.
func (f *Load) Stats() envoysim.Stats {
	var s envoysim.Stats
	for _, c := range f.Clients {
		cs := c.Stats()
		s.Responses += cs.Responses
		s.Resources += cs.Resources
		s.Removed += cs.Removed
		s.Bytes += cs.Bytes
		s.NACKs += cs.NACKs
		s.Requests += cs.Requests
	}
	return s
}

// Validate checks that every client holds exactly the world's current
// state: every cluster, and every assignment with the expected content.
func (f *Load) Validate(w *workload.World) error {
	// Content hashes of every cluster and assignment: counts alone would
	// accept a server that sends the right number of wrong clusters.
	want := make([]uint64, w.Spec.Services)
	wantCDS := make([]uint64, w.Spec.Services)
	for i := range want {
		r, err := w.Spec.Build(i, w.Last(i))
		if err != nil {
			return err
		}
		if want[i], err = envoysim.Hash(r.Assignment); err != nil {
			return err
		}
		if wantCDS[i], err = envoysim.Hash(r.Cluster); err != nil {
			return err
		}
	}
	bad := 0
	var first error
	for ci, c := range f.Clients {
		err := func() error {
			if err := c.Err(); err != nil {
				return fmt.Errorf("stream failed: %w", err)
			}
			if n := c.Len(envoysim.ClusterType); n != w.Spec.Services {
				return fmt.Errorf("holds %d clusters, want %d", n, w.Spec.Services)
			}
			if n := c.Len(envoysim.EndpointType); n != w.Spec.Services {
				return fmt.Errorf("holds %d assignments, want %d", n, w.Spec.Services)
			}
			for i, h := range want {
				if got, _, ok := c.Hash(envoysim.EndpointType, workload.Name(i)); !ok || got != h {
					return fmt.Errorf("assignment %s differs from the source (change %d)", workload.Name(i), w.Last(i))
				}
				if got, _, ok := c.Hash(envoysim.ClusterType, workload.Name(i)); !ok || got != wantCDS[i] {
					return fmt.Errorf("cluster %s differs from the source", workload.Name(i))
				}
			}
			return nil
		}()
		if err != nil {
			bad++
			if first == nil {
				first = fmt.Errorf("client %d: %w", ci, err)
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d clients hold a wrong state; first: %w", bad, len(f.Clients), first)
	}
	return nil
}

// Ports of a held assignment (nil when not held).
func Ports(c *envoysim.Client, name string) []int {
	cla, _ := c.Resource(envoysim.EndpointType, name).(*endpointv3.ClusterLoadAssignment)
	if cla == nil {
		return nil
	}
	var out []int
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out = append(out, int(e.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()))
		}
	}
	slices.Sort(out)
	return out
}

// Wait returns once every client holds the change, timeout after it was
// tracked, or when ctx ends, whichever comes first.
func (t *Change) Wait(ctx context.Context, timeout time.Duration) {
	select {
	case <-t.done:
	case <-time.After(timeout - time.Since(t.t0)):
	case <-ctx.Done():
	}
}
