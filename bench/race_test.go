//go:build race

package bench

// raceEnabled is set when the race detector is on.
const raceEnabled = true
