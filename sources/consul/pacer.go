package consul

import "time"

// The sweep pacer. The agent's time is the budget of sweeps: sweep reads
// (peeks, and full reads of services whose index is unknown) run at most
// sweepSlots at a time, and the pacer spaces them so that what they cost the agent adds up to at
// most sweepShare of the time. A read's cost is taken as costFactor times
// the shortest round trip among the recent reads of its kind: on loopback
// a round trip is the agent's work plus the transport's, and the shortest
// of many is one that did not wait for a CPU, so this follows how fast the
// agent is without mistaking a busy host's scheduling delays for the
// agent's work (which would slow sweeps to a crawl exactly when the host
// is busy for other reasons). The factor accounts for what a request
// costs the agent outside its round trip: collecting the garbage it
// allocated, on other threads, and its connection's reads and wakeups
// (docs/benchmarks.md has the agent's CPU measured against this charge).
// Over a network the round trip also holds the network's latency, and
// sweeps are slower.

// sweepShare is the share of the time sweep reads may keep the agent busy;
// sweepSlots how many run at once (two: one per core of a small host,
// without queueing in the agent that would inflate their round trips).
const (
	sweepShare = 0.2
	sweepSlots = 2
)

// costFactor: a sweep read is charged this many times its shortest recent
// round trip (see above).
const costFactor = 2

// pacerCredit bounds the credit a quiet pacer builds up, so that a sweep
// after an idle period starts with a short burst, not a long one.
const pacerCredit = 10 * time.Millisecond

// costWindow is how many recent round trips of each kind of sweep read
// the pacer takes the shortest of.
const costWindow = 64

// pacer accounts the cost of sweep reads against sweepShare of the wall
// clock.
type pacer struct {
	debt time.Duration // cost not yet covered by elapsed time
	at   time.Time     // when debt was last settled
	// recent holds the latest round trips of full reads (0) and peeks
	// (1), a ring each.
	recent [2][costWindow]time.Duration
	next   [2]int
}

func (p *pacer) settle(now time.Time) {
	if !p.at.IsZero() {
		p.debt -= time.Duration(float64(now.Sub(p.at)) * sweepShare)
	}
	p.at = now
	p.debt = max(p.debt, -pacerCredit)
}

// spend records a sweep read's round trip and charges its cost.
func (p *pacer) spend(peek bool, took time.Duration, now time.Time) {
	kind := 0
	if peek {
		kind = 1
	}
	p.recent[kind][p.next[kind]] = took
	p.next[kind] = (p.next[kind] + 1) % costWindow
	cost := took
	for _, d := range p.recent[kind] {
		if d > 0 && d < cost {
			cost = d
		}
	}
	p.settle(now)
	p.debt += costFactor * cost
}

// readyAt is when the next sweep read may start.
func (p *pacer) readyAt(now time.Time) time.Time {
	p.settle(now)
	if p.debt <= 0 {
		return now
	}
	return now.Add(time.Duration(float64(p.debt) / sweepShare))
}
