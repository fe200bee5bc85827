package replicas

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ledger is the replicas scenario's bookkeeping: the registry changes it
// makes, numbered from 1, and for every client when each change arrived,
// plus what each client received that brought it nothing new.
//
// A change k re-registers one instance of a service on port
// markerBase+k, so an assignment names the latest change of its service
// it reflects (its marker; 0 before any change). A client's assignment of
// a service moves only forward in a consistent fleet: a marker above the
// one held brings a change (and every earlier change of that service the
// client had not seen, which it supersedes); the same marker is a resend
// of what the client holds; a lower one is a revert, which a client sees
// when it moves to a replica that is behind the one it left.
//
// The churn goroutine alone makes changes (their writes may fail later,
// elsewhere); each client's receiving goroutine alone records that
// client's receipts; anyone may read. Times
// are kept as ticks of 100 µs since the ledger's epoch, so that an
// arrival fits in 32 bits (for 59 hours).
type ledger struct {
	epoch     time.Time
	clients   int
	services  int
	capacity  int            // changes it can hold, numbered 1..capacity-1
	svc, prev []int32        // per change: its service; the change before it on that service (0: none)
	at        []atomic.Int64 // per change: ticks when it was made (0: not made)
	failed    []atomic.Bool  // per change: the registry refused it
	mu        sync.Mutex     // guards lastOn
	lastOn    []int32        // per service: its latest change the registry did not refuse
	made      atomic.Int32   // changes made so far
	tracked   atomic.Int32   // the first change whose arrivals are recorded (0: none yet)
	arr       []atomic.Int32 // [client*capacity+k]: arrival ticks; negative: superseded then; 0: not yet
	held      [][]int32      // per client, per service: marker held, -1 before the first
	got       []receiptCounts
}

// markerBase+k is the port change k gives the instance it re-registers.
const markerBase = 20000

// receiptCounts are what one client received, on its first stream ([0])
// and on the streams after a reconnect ([1]).
type receiptCounts struct {
	clusters [2]atomic.Int64 // cluster resources (they never change here)
	// assignments counts every assignment received; fresh those that
	// brought a change; again those identical to the one held; reverts
	// those older than the one held; reapplied those that brought back a
	// change a revert had taken away.
	assignments, fresh, again, reverts, reapplied [2]atomic.Int64
}

func newLedger(clients, services, capacity int, epoch time.Time) *ledger {
	l := &ledger{
		epoch: epoch, clients: clients, services: services, capacity: capacity,
		svc: make([]int32, capacity), prev: make([]int32, capacity),
		at: make([]atomic.Int64, capacity), failed: make([]atomic.Bool, capacity),
		lastOn: make([]int32, services),
		arr:    make([]atomic.Int32, clients*capacity),
		held:   make([][]int32, clients),
		got:    make([]receiptCounts, clients),
	}
	for c := range l.held {
		l.held[c] = slices.Repeat([]int32{-1}, services)
	}
	return l
}

func (l *ledger) ticks(t time.Time) int64 {
	return max(int64(t.Sub(l.epoch)/(100*time.Microsecond)), 1)
}

func (l *ledger) time(ticks int64) time.Time {
	return l.epoch.Add(time.Duration(ticks) * 100 * time.Microsecond)
}

// make records change k on service svc, made now (before the registry is
// asked, so that no client can receive it first); 0 when the ledger is
// full.
func (l *ledger) make(svc int, now time.Time) int32 {
	k := l.made.Load() + 1
	if int(k) >= l.capacity {
		return 0
	}
	l.mu.Lock()
	l.svc[k], l.prev[k] = int32(svc), l.lastOn[svc]
	l.lastOn[svc] = k
	l.mu.Unlock()
	l.at[k].Store(l.ticks(now))
	l.made.Store(k)
	return k
}

// fail records that the registry refused change k: no client is owed it.
func (l *ledger) fail(k int32) {
	l.failed[k].Store(true)
	l.mu.Lock()
	if svc := l.svc[k]; l.lastOn[svc] == k {
		l.lastOn[svc] = l.prev[k]
	}
	l.mu.Unlock()
}

// track starts recording arrivals from the next change on.
func (l *ledger) track() { l.tracked.Store(l.made.Load() + 1) }

// lastChanged is when service svc last changed (zero time if never).
func (l *ledger) lastChanged(svc int) time.Time {
	l.mu.Lock()
	k := l.lastOn[svc]
	l.mu.Unlock()
	if k == 0 {
		return time.Time{}
	}
	return l.time(l.at[k].Load())
}

// cluster records a cluster resource received by client c.
func (l *ledger) cluster(c int, later bool) { l.got[c].clusters[b2i(later)].Add(1) }

// assignment records client c receiving service svc's assignment showing
// change k (later: on a stream after a reconnect).
func (l *ledger) assignment(c, svc int, k int32, later bool, now time.Time) {
	g, s := &l.got[c], b2i(later)
	g.assignments[s].Add(1)
	h := l.held[c][svc]
	l.held[c][svc] = k
	switch {
	case h >= 0 && k == h:
		g.again[s].Add(1)
		return
	case h >= 0 && k < h:
		g.reverts[s].Add(1)
		return
	}
	t := int32(l.ticks(now))
	if k > 0 && !l.arr[c*l.capacity+int(k)].CompareAndSwap(0, t) {
		g.reapplied[s].Add(1)
		return
	}
	g.fresh[s].Add(1)
	for p := l.prev[k]; p > max(h, 0); p = l.prev[p] {
		l.arr[c*l.capacity+int(p)].CompareAndSwap(0, -t)
	}
}

// arrival is when client c received change k (superseded: by a later
// change of the same service), ok false if not yet.
func (l *ledger) arrival(c int, k int32) (at time.Time, superseded, ok bool) {
	v := l.arr[c*l.capacity+int(k)].Load()
	if v == 0 {
		return time.Time{}, false, false
	}
	return l.time(int64(max(v, -v))), v < 0, true
}

// owed lists the tracked changes made in [from, to) that the registry
// accepted.
func (l *ledger) owed(from, to time.Time) []int32 {
	return l.owedTicks(l.ticks(from), l.ticks(to))
}

func (l *ledger) owedTicks(f, t int64) []int32 {
	var out []int32
	for k := max(l.tracked.Load(), 1); k <= l.made.Load(); k++ {
		if at := l.at[k].Load(); at >= f && at < t && !l.failed[k].Load() {
			out = append(out, k)
		}
	}
	return out
}

// current tells when client c, which lost its stream at lost and opened a
// new one at opened, was current again: it then held every change made
// before opened. lacked counts the changes it had to be sent (those that
// had not reached it before lost); ok is false while one is missing.
func (l *ledger) current(c int, lost, opened time.Time) (at time.Time, lacked int, ok bool) {
	at = opened
	for _, k := range l.owed(time.Time{}, opened) {
		got, _, arrived := l.arrival(c, k)
		if !arrived {
			return time.Time{}, lacked, false
		}
		if !got.Before(lost) {
			lacked++
			at = latest(at, got)
		}
	}
	return at, lacked, true
}

// latencies returns, for the changes made in [from, to), every client's
// latency (superseded changes: until the change that superseded them
// arrived), each change's slowest client, and the client·change pairs
// still missing.
func (l *ledger) latencies(from, to time.Time) (pairs, perChange []time.Duration, missing int) {
	for _, k := range l.owed(from, to) {
		made := l.time(l.at[k].Load())
		var slowest time.Duration
		complete := true
		for c := range l.clients {
			got, _, ok := l.arrival(c, k)
			if !ok {
				missing++
				complete = false
				continue
			}
			d := got.Sub(made)
			pairs = append(pairs, d)
			slowest = max(slowest, d)
		}
		if complete {
			perChange = append(perChange, slowest)
		}
	}
	return pairs, perChange, missing
}

// replicaLag returns, for each change made in [from, to), how far apart
// the replicas delivered it: the first arrival at any client of the
// latest replica less the first arrival at any client of the earliest.
// on[c] is client c's replica (-1: unknown) over that time.
func (l *ledger) replicaLag(on []int, replicas int, from, to time.Time) []time.Duration {
	var out []time.Duration
	for _, k := range l.owed(from, to) {
		first := make([]time.Time, replicas)
		for c, rep := range on {
			if rep < 0 || rep >= replicas {
				continue
			}
			if got, _, ok := l.arrival(c, k); ok && (first[rep].IsZero() || got.Before(first[rep])) {
				first[rep] = got
			}
		}
		if slices.ContainsFunc(first, time.Time.IsZero) {
			continue
		}
		lo := slices.MinFunc(first, time.Time.Compare)
		hi := slices.MaxFunc(first, time.Time.Compare)
		out = append(out, hi.Sub(lo))
	}
	return out
}

// superseded counts the client·change pairs of the tracked changes that
// arrived only as part of a later change of their service.
func (l *ledger) superseded() int {
	n := 0
	for _, k := range l.owedTicks(0, 1<<62) {
		for c := range l.clients {
			if _, s, _ := l.arrival(c, k); s {
				n++
			}
		}
	}
	return n
}

// holdsLatest reports whether client c's assignments show every service's
// latest accepted change (what the registry holds); it returns the first
// service that differs, -1 if none.
func (l *ledger) holdsLatest(c int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for svc, k := range l.lastOn {
		if l.held[c][svc] != max(k, 0) {
			return svc
		}
	}
	return -1
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
