// Package reclaim hands a process's free heap back to the operating system
// once a burst of allocation is over.
//
// Why it is needed: after a burst (a reconnect storm, a push to every
// client) the Go runtime keeps the burst's memory resident. Its garbage
// stays in the heap until the next collection, which a quiet process only
// reaches through the runtime's two-minute forced GC; and the background
// scavenger keeps about the heap goal mapped (twice the live heap with
// GOGC=100), so even then the pages stay. A container limit counts all of
// it for as long as the process is quiet. A Reclaimer samples the process's
// allocation counter and CPU time and, once a burst has been followed by a
// quiet period, collects and returns the free pages (debug.FreeOSMemory),
// once. While allocation goes on without a quiet period it never acts: the
// collector's own cycles set the pace then, and a forced collection would
// only add to them. Churn with quiet gaps gets one return after each burst
// that clears the bar below.
//
// Quiet means little allocation and little CPU. Allocation alone is not
// enough for a server that writes shared, pre-encoded bytes: in the middle
// of a reconnect storm it can go a whole second allocating almost nothing
// while it writes hundreds of megabytes to its clients, and a collection
// then costs the storm two full marks of a heap full of buffers in flight
// for little memory back. A process can also be in the middle of a storm
// while idle, waiting for slow clients to take what it has queued for them;
// Policy.Busy lets it say so.
//
// The cost is two full collections per burst (see release), and a burst
// only counts when it allocated at least half the live heap it started
// from, so with GOGC=100 a process collects at most about four times as
// often as the collector alone would (more with a higher GOGC), and only in
// a quiet moment.
//
// A shrink is the other way a burst leaves memory behind: a registry that
// goes from 100,000 services to 6 makes most of the live heap garbage
// while allocating little, and the collector, paced by allocation, may not
// run for minutes; nor does the allocation counter show it. Policy.State
// tells the Reclaimer the size of the process's state: a burst during
// which the state shrank counts the share of the live heap it shrank by
// as if allocated.
package reclaim

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Policy says when a burst is over and worth a collection.
type Policy struct {
	// Quiet is how long the allocation rate must stay under QuietRate
	// after a burst before its memory is returned; zero (or less than
	// four nanoseconds) disables the Reclaimer. The counter is sampled four
	// times per Quiet.
	Quiet time.Duration
	// QuietRate is the allocation rate, in bytes per second, under which
	// the process counts as quiet. A process that never gets under it
	// is never collected by the Reclaimer.
	QuietRate uint64
	// QuietCPU is the share of one CPU (0.1: 100 ms a second, user and
	// system time) under which the process counts as quiet; zero leaves
	// CPU out of the decision. Where the process's CPU time cannot be
	// read, it is left out too.
	QuietCPU float64
	// Busy, if set, reports work in flight that neither counter shows
	// (an xDS server's responses queued for slow clients); a sample
	// taken while busy is not quiet. It is called once a sample and must
	// be cheap.
	Busy func() bool
	// State, if set, is the size of the process's state in any unit
	// proportional to its live heap (an xDS server's resources). A sample
	// in which it fell is not quiet, and a burst during which it fell
	// from s0 to s1 counts (1 - s1/s0) of the live heap it started from
	// as allocated: the garbage the shrink left. It is called once a
	// sample and must be cheap.
	State func() int64
	// MinBurst is the least a burst must have allocated to be worth a
	// collection; a burst must also have allocated half the live heap
	// it started from.
	MinBurst uint64
}

// DefaultPolicy returns memory after a quiet second (under 1 MiB of
// allocation and 100 ms of CPU) that follows at least 16 MiB of allocation
// (and half the live heap).
var DefaultPolicy = Policy{Quiet: time.Second, QuietRate: 1 << 20, QuietCPU: 0.1, MinBurst: 16 << 20}

// quietSamples is how many samples make up Policy.Quiet.
const quietSamples = 4

// Stats is what a Reclaimer has done so far.
type Stats struct {
	Samples  int // samples of the allocation counter taken
	Releases int // returns of the free heap to the OS (two collections each)
	// Released is the heap returned to the OS by those collections, in
	// bytes (the runtime's count of released heap pages, before and
	// after each).
	Released uint64
	// Settled is true once the latest quiet period has been decided on
	// (memory returned, or too little allocated to be worth it), and
	// false from the first sample of a burst until then.
	Settled bool
}

// A Reclaimer returns memory after bursts; see the package comment. Its
// methods are safe for concurrent use.
type Reclaimer struct {
	read    func() sample
	release func()

	mu sync.Mutex
	d  decider
	st Stats
}

// New returns a Reclaimer with policy p, reading this process's runtime.
func New(p Policy) *Reclaimer {
	return &Reclaimer{read: readRuntime, release: release, d: decider{p: p, quiet: -1}, st: Stats{Settled: true}}
}

// release collects twice and returns the free heap to the OS. One
// collection is not enough after a burst: what the burst put back in
// sync.Pools (gRPC's write buffers, 32 KiB for each connection that was
// written to) survives the first collection in the pools' victim caches
// and is freed only by the second.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

// Run samples until ctx ends. It returns at once if the policy is
// disabled.
func (r *Reclaimer) Run(ctx context.Context) {
	interval := r.d.p.Quiet / quietSamples
	if interval <= 0 {
		return
	}
	r.mu.Lock()
	r.d.since(r.sample())
	r.mu.Unlock()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.step(interval)
	}
}

// step takes one sample and, if the decider says so, returns memory.
func (r *Reclaimer) step(interval time.Duration) {
	s := r.sample()
	r.mu.Lock()
	act := r.d.observe(s, interval)
	r.st.Samples++
	// A quiet period is settled once its memory is returned, not when the
	// collection starts.
	r.st.Settled = r.d.settled() && act == none
	r.mu.Unlock()
	if act == none {
		return
	}
	r.release()
	after := r.sample()
	r.mu.Lock()
	defer r.mu.Unlock()
	// The collection's own allocation and CPU are not a burst.
	r.d.since(after)
	r.st.Settled = true
	r.st.Releases++
	if after.released > s.released {
		r.st.Released += after.released - s.released
	}
}

// sample reads the runtime's counters and the policy's own.
func (r *Reclaimer) sample() sample {
	s := r.read()
	s.busy = r.d.p.Busy != nil && r.d.p.Busy()
	if r.d.p.State != nil {
		s.state = r.d.p.State()
	}
	return s
}

// Stats returns what the Reclaimer has done so far.
func (r *Reclaimer) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// sample is one reading of the runtime's counters, in bytes.
type sample struct {
	allocs   uint64        // allocated since the process started
	cpu      time.Duration // user and system CPU time since the process started; zero if unknown
	live     uint64        // live heap at the end of the last collection
	released uint64        // heap pages returned to the OS and not reused
	busy     bool          // Policy.Busy said so
	state    int64         // Policy.State, 0 without it
}

var sampleNames = []string{"/gc/heap/allocs:bytes", "/gc/heap/live:bytes", "/memory/classes/heap/released:bytes"}

// readRuntime reads the counters; runtime/metrics does so without stopping
// the world.
func readRuntime() sample {
	ms := make([]metrics.Sample, len(sampleNames))
	for i, n := range sampleNames {
		ms[i].Name = n
	}
	metrics.Read(ms)
	v := func(i int) uint64 {
		if ms[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return ms[i].Value.Uint64()
	}
	return sample{allocs: v(0), live: v(1), released: v(2), cpu: processCPU()}
}

type action int

const (
	none action = iota
	collect
)

// decider is the Reclaimer's policy over a sequence of samples; it has no
// clock and no runtime, so its tests state the sequences.
type decider struct {
	p         Policy
	last      uint64        // allocation counter at the previous sample
	lastCPU   time.Duration // CPU time at the previous sample
	lastState int64         // Policy.State at the previous sample
	burst     uint64        // allocated by the busy samples since the last decision
	bursting  bool          // a busy sample came since the last decision
	// live is the live heap when the burst began, and state the state
	// then. Later readings are no measure of what the burst is worth
	// collecting: a collection during the burst counts its buffers in
	// flight as live.
	live  uint64
	state int64
	quiet int // consecutive quiet samples; -1 once decided
}

// observe takes the next sample, interval after the previous one, and says
// whether to collect now.
func (d *decider) observe(s sample, interval time.Duration) action {
	n := s.allocs - d.last
	cpu := s.cpu - d.lastCPU
	before := d.lastState
	d.since(s)
	if s.busy || s.state < before || n >= uint64(float64(d.p.QuietRate)*interval.Seconds()) ||
		d.p.QuietCPU > 0 && float64(cpu) >= d.p.QuietCPU*float64(interval) {
		if !d.bursting {
			d.bursting, d.live, d.state = true, s.live, before
		}
		d.burst += n
		d.quiet = 0
		return none
	}
	if d.quiet < 0 {
		return none // this quiet period was decided on
	}
	if d.quiet++; d.quiet < quietSamples {
		return none
	}
	d.quiet = -1
	burst := d.burst
	if d.state > 0 && s.state < d.state {
		burst += uint64(float64(d.live) * float64(d.state-s.state) / float64(d.state))
	}
	d.burst, d.bursting = 0, false
	if burst < d.p.MinBurst || burst < d.live/2 {
		return none
	}
	return collect
}

// since makes s the previous sample: what came before it is not counted.
func (d *decider) since(s sample) {
	d.last, d.lastCPU, d.lastState = s.allocs, s.cpu, s.state
}

// settled reports whether the current quiet period has been decided on.
func (d *decider) settled() bool { return d.quiet < 0 }
