package metrics

import (
	"testing"
	"time"
)

// TestNextCount: the wait between counts is the interval, stretched so that
// counting takes at most a twentieth of the time, and spread by ±10 %.
func TestNextCount(t *testing.T) {
	for _, tc := range []struct {
		name           string
		interval, took time.Duration
		r              float64
		want           time.Duration
	}{
		{"fast count, middle of the spread", time.Minute, 100 * time.Millisecond, 0.5, time.Minute},
		{"fast count, earliest", time.Minute, 100 * time.Millisecond, 0, 54 * time.Second},
		{"fast count, latest", time.Minute, 100 * time.Millisecond, 1, 66 * time.Second},
		{"count of exactly a twentieth", time.Minute, 3 * time.Second, 0.5, time.Minute},
		{"a million JetStream records (6.5 s)", time.Minute, 6500 * time.Millisecond, 0.5, 130 * time.Second},
		{"count longer than the interval", time.Minute, 90 * time.Second, 0.5, 30 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextCount(tc.interval, tc.took, tc.r); got != tc.want {
				t.Errorf("nextCount(%v, %v, %v) = %v, want %v", tc.interval, tc.took, tc.r, got, tc.want)
			}
		})
	}
}
