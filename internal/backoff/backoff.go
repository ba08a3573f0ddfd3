// Package backoff is the module's one retry pause: an exponential [Backoff]
// and a [Sleep] that ends early when its context does (on the wall clock, or
// on a test's clock: [SleepOn]). It imports nothing but
// the standard library, so that every package may use it.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of a [Backoff] field left zero (or set out of range).
const (
	DefaultInitial    = 100 * time.Millisecond
	DefaultMax        = 10 * time.Second
	DefaultMultiplier = 2
)

// Backoff is an exponential backoff: the pause before retry n (n ≥ 1) is
// Initial·Multiplier^(n-1), capped at Max, of which the fraction Jitter is
// random. Its zero value pauses 100ms, 200ms, 400ms … up to 10s, without
// jitter.
type Backoff struct {
	// Initial is the pause before the first retry; DefaultInitial when ≤ 0.
	Initial time.Duration
	// Max caps every pause; DefaultMax when ≤ 0. A Max below Initial makes
	// every pause Max.
	Max time.Duration
	// Multiplier grows the pause from one retry to the next; DefaultMultiplier
	// when below 1 (or NaN). 1 keeps it constant.
	Multiplier float64
	// Jitter is the fraction of each pause that is drawn at random, in [0, 1]
	// (values outside are clamped): 0 gives the pause exactly, 0.5 a uniformly
	// random point in its upper half, 1 one anywhere below it.
	Jitter float64
}

// Delay returns the pause before retry n (n below 1 counts as 1), its random
// part drawn from math/rand/v2.
func (b Backoff) Delay(n int) time.Duration {
	u := 0.0
	if b.Jitter > 0 {
		u = rand.Float64()
	}
	return b.DelayAt(n, u)
}

// DelayAt returns the pause before retry n (n below 1 counts as 1) with u, a
// number in [0, 1] (clamped), as its random draw: the pause is
// d·(1-Jitter) + d·Jitter·u, d being the capped exponential value. It is
// Delay with the randomness in the caller's hands (tests, a seeded source).
func (b Backoff) DelayAt(n int, u float64) time.Duration {
	initial := b.Initial
	if initial <= 0 {
		initial = DefaultInitial
	}
	limit := b.Max
	if limit <= 0 {
		limit = DefaultMax
	}
	mult := b.Multiplier
	if !(mult >= 1) {
		mult = DefaultMultiplier
	}
	d := float64(initial) * math.Pow(mult, float64(max(n-1, 0)))
	if d > float64(limit) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(limit)
	}
	j := unit(b.Jitter)
	if j == 0 {
		return time.Duration(d)
	}
	return time.Duration(d*(1-j) + d*j*unit(u))
}

// unit returns x clamped to [0, 1], NaN as 0.
func unit(x float64) float64 {
	switch {
	case !(x > 0):
		return 0
	case x > 1:
		return 1
	}
	return x
}

// Sleep waits d on the wall clock, or until ctx ends, whichever comes first.
// It reports whether it waited the whole d: false when ctx ended first, at
// once if ctx had ended already (whatever d); true at once when d ≤ 0 and ctx
// is live.
func Sleep(ctx context.Context, d time.Duration) bool { return SleepOn(ctx, wallClock{}, d) }

// Timers makes the timers of a clock; the module's clocks (package clock's
// wall clock and the fake one tests move by hand) are Timers.
type Timers interface {
	NewTimer(d time.Duration) interface {
		C() <-chan time.Time
		Stop() bool
	}
}

// SleepOn is [Sleep] on the timers of c, so that a test's fake clock decides
// when the wait is over.
func SleepOn(ctx context.Context, c Timers, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if d <= 0 {
		return true
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// wallClock is the wall clock's Timers.
type wallClock struct{}

func (wallClock) NewTimer(d time.Duration) interface {
	C() <-chan time.Time
	Stop() bool
} {
	return wallTimer{time.NewTimer(d)}
}

// wallTimer is a *time.Timer as SleepOn reads it.
type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }
