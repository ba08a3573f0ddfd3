// Package wait polls a condition until it holds, for tests that wait on
// something another goroutine, process or server brings about.
//
// [Eventually] fails the test when the condition does not hold in time,
// [EventuallyNoError] does so with the condition's last error, and [Until]
// only reports, for tests that word their own failure.
//
// The condition is checked at once, then after pauses that grow from 1 ms to
// 20 ms: a condition that soon holds is seen soon, one that takes seconds is
// not checked more than fifty times a second.
package wait

import (
	"testing"
	"time"
)

// Pauses between two checks: the first, and the most they grow to.
const (
	firstPause = time.Millisecond
	maxPause   = 20 * time.Millisecond
)

// Until reports whether cond holds within the given time. cond is checked at
// least once, and once more after the time is up.
func Until(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := firstPause
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
	return true
}

// Eventually waits until cond holds, and fails the test, saying what it
// waited for and how long, if it does not within the given time.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(within, cond) {
		t.Fatalf("still waiting after %s for %s", within, what)
	}
}

// EventuallyNoError waits until check returns nil, and fails the test, saying
// what it waited for, how long, and check's last error, if it does not within
// the given time.
func EventuallyNoError(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	var err error
	if !Until(within, func() bool { err = check(); return err == nil }) {
		t.Fatalf("still waiting after %s for %s: %v", within, what, err)
	}
}
