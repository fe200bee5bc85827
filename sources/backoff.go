package sources

import "github.com/xdsbridge/xdsbridge/internal/pacing"

// Backoff paces the retries of one dependency: exponential from Min,
// doubling on every failure (Next) up to Max, each wait drawn with jitter
// from [d/2, d] so that many bridges retrying after the same outage spread
// out instead of arriving together; a success calls Reset. Every loop that
// talks to a registry owns one Backoff per dependency and paces every
// retry by it, whatever the error looks like (refused, reset, timeout,
// TLS, an HTTP status). A signal that something changed (a kick) may cut
// one wait short, never skip the next: the loop still calls Next before
// its following retry.
//
// The zero value is not useful: set Min and Max (Min <= Max, both > 0).
// A Backoff is not safe for concurrent use; it belongs to one loop.
type Backoff = pacing.Backoff
