//go:build race

package xds

// raceEnabled scales tests that measure time or memory down under the race
// detector, which slows the engine many times over and changes its
// allocations.
const raceEnabled = true
