//go:build !race

package wire

// raceEnabled reports whether the tests run with the race detector, under
// which sync.Pool drops what it holds at random and allocation counts mean
// nothing.
const raceEnabled = false
