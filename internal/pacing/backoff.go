// Package pacing holds the one rule by which every loop of the bridge that
// talks to a dependency (a registry, a file, a disk) behaves while that
// dependency fails: retries spaced by an exponential backoff with jitter
// and a cap, whatever the error looks like (Backoff), and a log that says
// the dependency failed once, then at most once a minute with a count, and
// once that it recovered (FailureLog). Package sources exports both to
// source authors; the bridge's own loops (TLS files, xDS files, the state
// directory, source restarts) use them from here.
package pacing

import (
	"math/rand/v2"
	"time"
)

// Backoff paces the retries of one dependency: exponential from Min,
// doubling on every failure up to Max, each wait drawn with jitter from
// [d/2, d] so that many bridges retrying after the same outage spread out
// instead of arriving together. Every loop that talks to a dependency owns
// one Backoff per dependency and paces every retry by it, whatever the
// error looks like; a success calls Reset. A signal that something changed
// (a kick) may cut one wait short, never skip the next: the loop still
// calls Next before its following retry.
//
// The zero value is not useful: set Min and Max (Min <= Max, both > 0).
// A Backoff is not safe for concurrent use; it belongs to one loop.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns the wait before the next attempt and advances the
// exponent.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Min
	} else {
		b.cur = min(2*b.cur, b.Max)
	}
	return Jitter(b.cur)
}

// Reset starts the exponent over after a success.
func (b *Backoff) Reset() { b.cur = 0 }

// Jitter returns a random duration in [d/2, d], so that retries of loops
// failing together do not fall in lockstep.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(half+1) //nolint:gosec // jitter spreads retries; nothing depends on it being unpredictable
}
