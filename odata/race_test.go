//go:build race

package odata

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
