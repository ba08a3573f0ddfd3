package faults

import (
	"time"

	"github.com/tesserix/toolexec/internal/clock"
)

// SkewedClock is a [clock.Clock] that disagrees with the one it wraps: it reads
// Offset ahead (or behind, when negative), and its timers run Rate times slower
// (a Rate of 10 makes a timer of one second fire after ten). It is how a
// scenario gives workers clocks that disagree by far more than a lease. The
// zero Rate means 1.
type SkewedClock struct {
	// Base is the clock being skewed; nil means the wall clock.
	Base   clock.Clock
	Offset time.Duration
	Rate   float64
}

var _ clock.Clock = SkewedClock{}

func (s SkewedClock) base() clock.Clock {
	if s.Base == nil {
		return clock.Real{}
	}
	return s.Base
}

// Now returns the base clock's time plus Offset.
func (s SkewedClock) Now() time.Time { return s.base().Now().Add(s.Offset) }

// NewTimer returns a base timer of d times Rate.
func (s SkewedClock) NewTimer(d time.Duration) clock.Timer {
	if s.Rate > 0 && s.Rate != 1 {
		d = time.Duration(float64(d) * s.Rate)
	}
	return s.base().NewTimer(d)
}
