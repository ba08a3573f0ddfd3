//go:build race

package bus_test

// raceEnabled reports whether the tests run with the race detector, whose
// instrumentation allocates memory of its own.
const raceEnabled = true
