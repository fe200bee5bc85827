package consul

import (
	"fmt"
	"strings"
	"time"
)

// What the status and the log say about watches, censuses and sweeps: how
// many services are watched, how often the others are censused or how
// long the last sweep of them took (the time within which a change no
// bulk query sees is found on an unwatched service), and, over plain HTTP
// with services left unwatched, what to change.

// noteWatches shows in the status how many services are watched.
func (l *loop) noteWatches() {
	if l.w.capacity() == 0 {
		return
	}
	l.s.status.Note("watches", l.coverage())
}

// coverage describes the watches and sweeps.
func (l *loop) coverage() string {
	proto := "HTTP/1.1"
	if l.w.perLane > 1 {
		proto = "HTTP/2"
	}
	services := l.serviceCount()
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d services watched (room for %d on %d %s connections)",
		l.w.watching(), services, l.w.capacity(), len(l.w.lanes), proto)
	dumping := l.dumping()
	if dumping {
		fmt.Fprintf(&b, "; the others are followed by censuses of every instance, one every %v at most (the last took the agent %v): a change on an unwatched service reaches clients within about that long",
			l.lastDump.every.Round(10*time.Millisecond), l.lastDump.took.Round(time.Millisecond))
	} else {
		b.WriteString("; the rest are swept")
	}
	if sw := l.lastSweep; sw.size > 0 && !dumping {
		fmt.Fprintf(&b, "; the last sweep looked at %d services in %v: a change no bulk query sees (an instance added or removed without checks, a new port or address) on an unwatched service takes up to about twice that long (one just behind a running sweep waits for the next), checks, maintenance, instances with checks and services that appear or vanish are seen within about a second",
			sw.size, sw.took.Round(10*time.Millisecond))
	}
	if services > l.w.capacity() && !l.s.plan.http2 {
		b.WriteString("; " + plainHTTPAdvice)
	}
	return b.String()
}

// dumping reports whether the last census of every datacenter with
// unwatched services was a dump that ACLs did not filter (no sweeps run).
func (l *loop) dumping() bool {
	if l.lastDump == nil {
		return false
	}
	for dc, d := range l.dcs {
		if !d.dumped && l.unwatched(dc) {
			return false
		}
	}
	return true
}

// plainHTTPAdvice says how to watch every service when plain HTTP leaves
// some unwatched.
const plainHTTPAdvice = "over plain HTTP each watch holds a connection of the agent's per-client limit: give the agent an HTTPS listener (HTTP/2 carries 200 watches per connection) or raise its limits.http_max_conns_per_client"

// logCoverage logs, once the first sync is complete, when plain HTTP
// leaves services unwatched.
func (l *loop) logCoverage() {
	if services := l.serviceCount(); services > l.w.capacity() && !l.s.plan.http2 {
		l.s.log.Warn("not every service can be watched; the others are followed by censuses of the catalog or swept",
			"services", services, "watchable", l.w.capacity(), "advice", plainHTTPAdvice)
	}
}
