// Package fleet is the benchmarks' simulated xDS clients (envoysim in Light
// mode). Fleet is what the registry benchmarks under bench/ share: ADS
// clients that time a change from the moment it is written to the registry
// until every client holds it, and the arithmetic of their reports
// (percentiles, medians of runs, the process's CPU). Load is the load
// generator's fleet: C clients of one world (workload) in this process,
// whose responses are turned into the cold start's time and each change's
// convergence, and checked against the world's state at the end.
package fleet

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// Fleet is n ADS clients of one bridge, each subscribed to every cluster.
type Fleet struct {
	clients []*envoysim.Client
	// target is the cluster whose next assignment is being timed ("" when
	// none); seen when each client first received one.
	target atomic.Value
	mu     sync.Mutex
	seen   map[int]time.Time
}

// Start connects n clients to the bridge's xDS address; they are closed
// when the test ends.
func Start(t testing.TB, xdsAddr string, n int) *Fleet {
	t.Helper()
	f := &Fleet{seen: map[int]time.Time{}}
	f.target.Store("")
	for c := range n {
		cl, err := envoysim.Start(t.Context(), envoysim.Options{Addr: xdsAddr, Node: fmt.Sprint("n", c), Light: true,
			OnResponse: func(_ *envoysim.Client, rcv envoysim.Received) { f.received(c, rcv) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		f.clients = append(f.clients, cl)
	}
	return f
}

func (f *Fleet) received(c int, rcv envoysim.Received) {
	tg := f.target.Load().(string)
	if tg == "" || rcv.TypeURL != envoysim.EndpointType || !slices.Contains(rcv.Names, tg) {
		return
	}
	f.mu.Lock()
	if _, ok := f.seen[c]; !ok {
		f.seen[c] = time.Now()
	}
	f.mu.Unlock()
}

// WaitSynced waits until every client holds at least services
// assignments.
func (f *Fleet) WaitSynced(t testing.TB, services int) {
	t.Helper()
	bridgetest.Eventually(t, 10*time.Minute, "every client to hold every assignment", func() bool {
		for _, cl := range f.clients {
			if cl.Len(envoysim.EndpointType) < services {
				return false
			}
		}
		return true
	})
}

// Time runs write, which changes cluster in the registry, and returns the
// time from its start until the last client received an assignment of
// cluster.
func (f *Fleet) Time(t testing.TB, cluster string, write func()) time.Duration {
	t.Helper()
	f.mu.Lock()
	clear(f.seen)
	f.mu.Unlock()
	f.target.Store(cluster)
	defer f.target.Store("")
	t0 := time.Now()
	write()
	var last time.Time
	bridgetest.Eventually(t, time.Minute, "every client to hold the change of "+cluster, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.seen) < len(f.clients) {
			return false
		}
		for _, ts := range f.seen {
			if ts.After(last) {
				last = ts
			}
		}
		return true
	})
	return last.Sub(t0)
}

// CPU returns the CPU time the process has used, user and system.
func CPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Pct returns the p-th quantile (0..1) of xs, nearest rank.
func Pct(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// Median returns the median over runs of the figure f picks.
func Median[R any](runs []R, f func(R) float64) float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// Discard is a log sink that keeps nothing.
type Discard struct{}

func (Discard) Write(p []byte) (int, error) { return len(p), nil }
