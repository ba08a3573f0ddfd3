//go:build race

package idemkey_test

// raceEnabled reports whether the tests run with the race detector, under
// which sync.Pool drops what it holds at random.
const raceEnabled = true
