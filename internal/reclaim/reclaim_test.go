package reclaim

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/xdsbridge/xdsbridge/test/testwait"
)

const mib = 1 << 20

// run feeds the decider one sample per step: the bytes allocated in that
// step and the live heap, and returns the steps at which it collected.
func run(p Policy, live uint64, allocs ...uint64) []int {
	d := decider{p: p, quiet: -1}
	var total uint64
	var at []int
	for i, n := range allocs {
		total += n
		if d.observe(sample{allocs: total, live: live}, p.Quiet/quietSamples) == collect {
			at = append(at, i)
		}
	}
	return at
}

func TestDecider(t *testing.T) {
	p := Policy{Quiet: time.Second, QuietRate: 4 * mib, MinBurst: 16 * mib} // quiet: under 1 MiB a sample
	busy, idle := uint64(10*mib), uint64(100<<10)
	for _, c := range []struct {
		name   string
		live   uint64
		allocs []uint64
		want   []int
	}{
		{"a burst then a quiet period collects once, at its end", 8 * mib,
			[]uint64{busy, busy, idle, idle, idle, idle, idle, idle, idle}, []int{5}},
		{"a quiet period shorter than Quiet does not", 8 * mib,
			[]uint64{busy, busy, idle, idle, idle, busy, idle, idle}, nil},
		{"steady allocation never does", 8 * mib,
			[]uint64{busy, busy, busy, busy, busy, busy, busy, busy, busy}, nil},
		{"a burst under MinBurst does not", 8 * mib,
			[]uint64{busy, idle, idle, idle, idle}, nil},
		{"nor one under half the live heap", 64 * mib,
			[]uint64{busy, busy, idle, idle, idle, idle}, nil},
		{"a small burst is forgotten once decided on", 8 * mib,
			[]uint64{busy, idle, idle, idle, idle, busy, idle, idle, idle, idle}, nil},
		{"each burst is collected after it", 8 * mib,
			[]uint64{busy, busy, idle, idle, idle, idle, busy, busy, idle, idle, idle, idle}, []int{5, 11}},
		{"idle from the start never collects", 0,
			[]uint64{idle, idle, idle, idle, idle, idle}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := run(p, c.live, c.allocs...); !equal(got, c.want) {
				t.Errorf("collected at samples %v, want %v", got, c.want)
			}
		})
	}
}

// TestDeciderLiveAtBurstStart: a collection during a burst counts the
// burst's own buffers as live; the burst is weighed against the live heap
// it started from, or a large burst would inflate its own bar.
func TestDeciderLiveAtBurstStart(t *testing.T) {
	p := Policy{Quiet: time.Second, QuietRate: 4 * mib, MinBurst: 16 * mib}
	d := decider{p: p, quiet: -1}
	var total uint64
	var got action
	for _, s := range []struct{ alloc, live uint64 }{
		{10 * mib, 40 * mib}, {10 * mib, 40 * mib}, {10 * mib, 80 * mib},
		{0, 80 * mib}, {0, 80 * mib}, {0, 80 * mib}, {0, 80 * mib},
	} {
		total += s.alloc
		got = d.observe(sample{allocs: total, live: s.live}, p.Quiet/quietSamples)
	}
	if got != collect {
		t.Errorf("a 30 MiB burst from a 40 MiB live heap, measured at 80 MiB mid-burst: not collected")
	}
}

// TestDeciderShrink: a state that shrinks leaves its garbage behind while
// allocating little. A burst counts the share of the live heap the state
// shrank by, so a large shrink is collected once quiet, however little it
// allocated, and a small one is not; a sample in which the state fell is
// not quiet even with no allocation.
func TestDeciderShrink(t *testing.T) {
	p := Policy{Quiet: time.Second, QuietRate: 4 * mib, MinBurst: 16 * mib}
	idle := uint64(100 << 10)
	for _, c := range []struct {
		name   string
		allocs []uint64
		states []int64
		want   []int
	}{
		{"a shrink to a hundredth with a small burst collects", []uint64{2 * mib, 2 * mib, idle, idle, idle, idle},
			[]int64{100000, 1000, 1000, 1000, 1000, 1000}, []int{5}},
		{"so does one that allocates nothing", []uint64{0, 0, 0, 0, 0, 0},
			[]int64{100, 100, 100, 100, 100, 100}, []int{4}},
		{"a shrink by a tenth does not", []uint64{2 * mib, idle, idle, idle, idle, idle},
			[]int64{90000, 90000, 90000, 90000, 90000, 90000}, nil},
		{"nor does growth", []uint64{2 * mib, idle, idle, idle, idle, idle},
			[]int64{200000, 200000, 200000, 200000, 200000, 200000}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := decider{p: p, quiet: -1}
			d.since(sample{state: 100000, live: 400 * mib})
			var s sample
			var at []int
			for i := range c.allocs {
				s.allocs += c.allocs[i]
				s.state, s.live = c.states[i], 400*mib
				if d.observe(s, p.Quiet/quietSamples) == collect {
					at = append(at, i)
				}
			}
			if !equal(at, c.want) {
				t.Errorf("collected at samples %v, want %v", at, c.want)
			}
		})
	}
}

// TestDeciderCPU: a process that allocates little but burns CPU (a server
// writing pre-encoded bytes through a reconnect storm) is not quiet; its
// quiet period starts when the CPU use falls too.
func TestDeciderCPU(t *testing.T) {
	p := Policy{Quiet: time.Second, QuietRate: 4 * mib, QuietCPU: 0.1, MinBurst: 16 * mib}
	interval := p.Quiet / quietSamples
	busyCPU, idleCPU := interval/2, interval/20 // 50% and 5% of a CPU
	for _, c := range []struct {
		name   string
		cpu    []time.Duration
		want   []int
		policy func(Policy) Policy
	}{
		{"writing without allocating postpones the collection", []time.Duration{
			busyCPU, busyCPU, busyCPU, busyCPU, busyCPU, busyCPU, idleCPU, idleCPU, idleCPU, idleCPU}, []int{9}, nil},
		{"light CPU use is quiet", []time.Duration{
			busyCPU, busyCPU, idleCPU, idleCPU, idleCPU, idleCPU}, []int{5}, nil},
		{"QuietCPU zero leaves CPU out", []time.Duration{
			busyCPU, busyCPU, busyCPU, busyCPU, busyCPU, busyCPU}, []int{5},
			func(p Policy) Policy { p.QuietCPU = 0; return p }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := p
			if c.policy != nil {
				p = c.policy(p)
			}
			d := decider{p: p, quiet: -1}
			var s sample
			var at []int
			for i, cpu := range c.cpu {
				if i < 2 {
					s.allocs += 10 * mib // the burst; allocation is idle after it
				}
				s.cpu += cpu
				if d.observe(s, interval) == collect {
					at = append(at, i)
				}
			}
			if !equal(at, c.want) {
				t.Errorf("collected at samples %v, want %v", at, c.want)
			}
		})
	}
}

// TestDeciderBusy: a process idle while its clients are slow to take what
// it queued for them is not quiet; the quiet period starts once the hook
// says the work in flight is done.
func TestDeciderBusy(t *testing.T) {
	p := Policy{Quiet: time.Second, QuietRate: 4 * mib, MinBurst: 16 * mib}
	interval := p.Quiet / quietSamples
	d := decider{p: p, quiet: -1}
	var s sample
	var at []int
	for i, busy := range []bool{true, true, true, true, true, true, false, false, false, false} {
		if i < 2 {
			s.allocs += 10 * mib
		}
		s.busy = busy
		if d.observe(s, interval) == collect {
			at = append(at, i)
		}
	}
	if !equal(at, []int{9}) {
		t.Errorf("collected at samples %v, want [9]: four samples after the work in flight ended", at)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fakeRuntime stands for the runtime's counters and its release.
type fakeRuntime struct {
	mu       sync.Mutex
	cur      sample
	releases int
	// settledDuring records whether the Reclaimer said it had settled
	// while its release was under way.
	settledDuring bool
}

func (f *fakeRuntime) allocate(n uint64) { f.mu.Lock(); f.cur.allocs += n; f.mu.Unlock() }
func (f *fakeRuntime) read() sample      { f.mu.Lock(); defer f.mu.Unlock(); return f.cur }
func (f *fakeRuntime) released() int     { f.mu.Lock(); defer f.mu.Unlock(); return f.releases }

// TestReclaimerSettles drives a Reclaimer on a fake clock and counters:
// Settled goes false with a burst and true when its quiet period is decided,
// and the release runs once, with the released bytes counted.
func TestReclaimerSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRuntime{}
		r := New(Policy{Quiet: time.Second, QuietRate: mib, MinBurst: 16 * mib})
		r.read = f.read
		r.release = func() {
			settled := r.Stats().Settled
			f.mu.Lock()
			f.releases++
			f.cur.released += 30 * mib
			f.settledDuring = f.settledDuring || settled
			f.mu.Unlock()
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		synctest.Wait()

		f.allocate(40 * mib)
		time.Sleep(250 * time.Millisecond) // one sample, on the fake clock
		synctest.Wait()
		if st := r.Stats(); st.Settled || st.Samples != 1 {
			t.Fatalf("after a burst: %+v, want unsettled after 1 sample", st)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		st := r.Stats()
		if !st.Settled || st.Releases != 1 || f.released() != 1 || st.Released != 30*mib {
			t.Fatalf("after a quiet second: %+v (released %d times), want settled, 1 release of 30 MiB", st, f.released())
		}
		f.mu.Lock()
		if f.settledDuring {
			t.Errorf("Settled while the memory was being returned: a reader would measure too early")
		}
		f.mu.Unlock()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := f.released(); n != 1 {
			t.Fatalf("released %d times while idle, want 1", n)
		}
		cancel()
		<-done
	})
}

// TestReclaimerReturnsMemory runs the real runtime: a burst's buffers,
// left in a sync.Pool as gRPC leaves its write buffers, are freed and
// returned once the process is quiet. One collection would leave them in
// the pool's victim cache.
func TestReclaimerReturnsMemory(t *testing.T) {
	r := New(Policy{Quiet: 40 * time.Millisecond, QuietRate: 64 * mib, MinBurst: 16 * mib})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go r.Run(ctx)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the Reclaimer's stats: %+v", r.Stats())
		}
	})
	// The burst must come after the Reclaimer's first reading, or that
	// reading already counts it. Waiting on its state; the deadlines only
	// bound a failure.
	testwait.Eventually(t, testwait.Patience, "a first sample", func() bool { return r.Stats().Samples > 0 })
	var pool sync.Pool
	var bufs [][]byte
	for range 64 {
		bufs = append(bufs, make([]byte, mib))
	}
	for _, b := range bufs {
		pool.Put(&b)
	}
	bufs = nil //nolint:ineffassign // says where the test lets go of it, before it checks the memory is freed
	testwait.Eventually(t, testwait.Patience, "a release after a 64 MiB burst", func() bool { return r.Stats().Releases > 0 })
	if st := r.Stats(); st.Released == 0 {
		t.Errorf("released %+v, want some heap returned", st)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > 32*mib {
		t.Errorf("heap in use %d MiB after the release, want the pooled 64 MiB freed", ms.HeapInuse/mib)
	}
	runtime.KeepAlive(&pool)
}

func TestMapShrinksOnceAQuarterIsLeft(t *testing.T) {
	m, peak := map[int]int{}, 0
	for i := range 4000 {
		m[i] = i
	}
	if m = Map(m, &peak); peak != 4000 {
		t.Fatalf("peak %d after growing to 4000", peak)
	}
	for i := range 2999 {
		delete(m, i)
	}
	before := m
	if m = Map(m, &peak); !sameMap(m, before) || peak != 4000 {
		t.Fatal("copied with a quarter left")
	}
	delete(m, 2999)
	delete(m, 3000)
	if m = Map(m, &peak); sameMap(m, before) || len(m) != 999 || m[3500] != 3500 || peak != 999 {
		t.Fatalf("not copied with less than a quarter left (peak %d, %d entries)", peak, len(m))
	}
	small, sp := map[int]int{1: 1, 2: 2, 3: 3}, 0
	Map(small, &sp)
	delete(small, 1)
	delete(small, 2)
	if got := Map(small, &sp); !sameMap(got, small) {
		t.Fatal("a small map was copied")
	}
}

// sameMap reports whether a and b are the same map (not equal contents).
func sameMap(a, b map[int]int) bool {
	a[-1] = 0
	_, ok := b[-1]
	delete(a, -1)
	return ok
}

func TestBufferKeepsOnlyWhatSuits(t *testing.T) {
	for _, c := range []struct {
		name   string
		cap, n int
		kept   bool
	}{
		{"large enough", 1 << 20, 900 << 10, true},
		{"too small", 1 << 10, 2 << 10, false},
		{"once much larger", 64 << 20, 1 << 10, false},
	} {
		if got := Buffer(make([]byte, 0, c.cap), c.n) != nil; got != c.kept {
			t.Errorf("%s: kept %v, want %v", c.name, got, c.kept)
		}
	}
}
