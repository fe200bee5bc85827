package consul

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// coverage says in the status and the log how the services are followed:
// how many are watched, how often the others are censused or how long the
// last sweep of them took (the time within which a change no bulk query
// sees is found on an unwatched service), and, over plain HTTP with
// services left unwatched, what to change. The watch set and the sweeper
// mark it changed; the loop shows it once per turn at most.
type coverage struct {
	log    *slog.Logger
	status *sources.Status
	due    bool
}

// watchFacts is what the watch set tells of itself.
type watchFacts struct {
	watching, services, capacity, lanes int
	http2                               bool // each lane carries several watches
}

// followFacts is what the sweeper tells of the services without a watch:
// whether censuses of every instance follow them (dumping), how often and
// at what cost, and the last sweep.
type followFacts struct {
	dumping     bool
	every, took time.Duration // of the last census that was a dump
	swept       int           // services the last sweep looked at
	sweepTook   time.Duration
}

// changed marks the note out of date.
func (c *coverage) changed() { c.due = true }

// show shows in the status how many services are watched, when changed.
func (c *coverage) show(w watchFacts, f followFacts, http2 bool) {
	if !c.due {
		return
	}
	c.due = false
	if w.capacity == 0 {
		return
	}
	c.status.Note("watches", describe(w, f, http2))
}

// describe describes the watches and sweeps.
func describe(w watchFacts, f followFacts, http2 bool) string {
	proto := "HTTP/1.1"
	if w.http2 {
		proto = "HTTP/2"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d services watched (room for %d on %d %s connections)",
		w.watching, w.services, w.capacity, w.lanes, proto)
	if f.dumping {
		fmt.Fprintf(&b, "; the others are followed by censuses of every instance, one every %v at most (the last took the agent %v): a change on an unwatched service reaches clients within about that long",
			f.every.Round(10*time.Millisecond), f.took.Round(time.Millisecond))
	} else {
		b.WriteString("; the rest are swept")
	}
	if f.swept > 0 && !f.dumping {
		fmt.Fprintf(&b, "; the last sweep looked at %d services in %v: a change no bulk query sees (an instance added or removed without checks, a new port or address) on an unwatched service takes up to about twice that long (one just behind a running sweep waits for the next), checks, maintenance, instances with checks and services that appear or vanish are seen within about a second",
			f.swept, f.sweepTook.Round(10*time.Millisecond))
	}
	if w.services > w.capacity && !http2 {
		b.WriteString("; " + plainHTTPAdvice)
	}
	return b.String()
}

// plainHTTPAdvice says how to watch every service when plain HTTP leaves
// some unwatched.
const plainHTTPAdvice = "over plain HTTP each watch holds a connection of the agent's per-client limit: give the agent an HTTPS listener (HTTP/2 carries 200 watches per connection) or raise its limits.http_max_conns_per_client"

// warn logs, once the first sync is complete, when plain HTTP leaves
// services unwatched.
func (c *coverage) warn(w watchFacts, http2 bool) {
	if w.services > w.capacity && !http2 {
		c.log.Warn("not every service can be watched; the others are followed by censuses of the catalog or swept",
			"services", w.services, "watchable", w.capacity, "advice", plainHTTPAdvice)
	}
}
