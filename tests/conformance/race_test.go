//go:build race

package conformance

// raceEnabled reports whether the tests run with the race detector; the
// executor is then built with it too.
const raceEnabled = true
