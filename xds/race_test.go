//go:build race

package xds

// raceEnabled scales tests that measure time or memory down under the race
// detector, which slows the engine tenfold and changes its allocations.
const raceEnabled = true
