//go:build !race

package xds

const raceEnabled = false
