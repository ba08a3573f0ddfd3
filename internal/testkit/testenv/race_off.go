//go:build !race

package testenv

// Race reports whether the tests run with the race detector: its
// instrumentation allocates memory of its own, makes sync.Pool drop what it
// holds at random, and slows everything down.
const Race = false
