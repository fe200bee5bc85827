//go:build race

package faults

// raceEnabled: the tests run with -race, so the bridge is built with it too.
const raceEnabled = true
