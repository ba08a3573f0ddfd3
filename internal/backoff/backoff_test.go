package backoff

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/clock"
)

const ms = time.Millisecond

func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Backoff
		want []time.Duration // pauses before retries 1, 2, 3 …
	}{
		{"doubling, capped", Backoff{Initial: 50 * ms, Max: time.Second},
			[]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"cap below the doubling", Backoff{Initial: 50 * ms, Max: 500 * ms, Multiplier: 2},
			[]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms}},
		{"factor 3", Backoff{Initial: 10 * ms, Max: time.Second, Multiplier: 3},
			[]time.Duration{10 * ms, 30 * ms, 90 * ms, 270 * ms, 810 * ms, time.Second}},
		{"factor 1 is constant", Backoff{Initial: 7 * ms, Max: time.Second, Multiplier: 1},
			[]time.Duration{7 * ms, 7 * ms, 7 * ms}},
		{"cap below initial", Backoff{Initial: 10 * time.Second, Max: 5 * time.Second},
			[]time.Duration{5 * time.Second, 5 * time.Second}},
		{"zero value: the defaults", Backoff{},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 10 * time.Second}},
		{"negative values: the defaults", Backoff{Initial: -1, Max: -1, Multiplier: -2},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms}},
		{"factor below 1: the default", Backoff{Initial: ms, Max: time.Second, Multiplier: 0.5},
			[]time.Duration{ms, 2 * ms, 4 * ms}},
		{"NaN factor: the default", Backoff{Initial: ms, Max: time.Second, Multiplier: math.NaN()},
			[]time.Duration{ms, 2 * ms, 4 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				if got := tc.b.Delay(i + 1); got != want {
					t.Errorf("Delay(%d) = %v, want %v", i+1, got, want)
				}
			}
			if got, want := tc.b.Delay(0), tc.b.Delay(1); got != want {
				t.Errorf("Delay(0) = %v, want Delay(1) = %v", got, want)
			}
			if got, want := tc.b.Delay(-3), tc.b.Delay(1); got != want {
				t.Errorf("Delay(-3) = %v, want Delay(1) = %v", got, want)
			}
		})
	}
}

func TestDelayHuge(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 10}
	for _, n := range []int{30, 400, math.MaxInt} {
		if got := b.Delay(n); got != time.Hour {
			t.Errorf("Delay(%d) = %v, want the cap, 1h", n, got)
		}
	}
}

func TestDelayAtJitter(t *testing.T) {
	half := Backoff{Initial: 100 * ms, Max: time.Second, Jitter: 0.5}
	for _, tc := range []struct {
		name string
		b    Backoff
		n    int
		u    float64
		want time.Duration
	}{
		{"upper half, lowest draw", half, 1, 0, 50 * ms},
		{"upper half, middle draw", half, 1, 0.5, 75 * ms},
		{"upper half, highest draw", half, 1, 1, 100 * ms},
		{"upper half of the cap", half, 9, 0, 500 * ms},
		{"draw above 1 clamped", half, 2, 7, 200 * ms},
		{"draw below 0 clamped", half, 2, -1, 100 * ms},
		{"NaN draw as 0", half, 2, math.NaN(), 100 * ms},
		{"no jitter ignores the draw", Backoff{Initial: 100 * ms}, 1, 0.3, 100 * ms},
		{"full jitter", Backoff{Initial: 100 * ms, Jitter: 1}, 1, 0.25, 25 * ms},
		{"jitter above 1 clamped", Backoff{Initial: 100 * ms, Jitter: 3}, 1, 0.25, 25 * ms},
		{"negative jitter as none", Backoff{Initial: 100 * ms, Jitter: -1}, 1, 0.25, 100 * ms},
		{"NaN jitter as none", Backoff{Initial: 100 * ms, Jitter: math.NaN()}, 1, 0.25, 100 * ms},
	} {
		if got := tc.b.DelayAt(tc.n, tc.u); got != tc.want {
			t.Errorf("%s: DelayAt(%d, %v) = %v, want %v", tc.name, tc.n, tc.u, got, tc.want)
		}
	}
}

// TestDelayJitterBounds: Delay's random draws stay within the jittered part.
func TestDelayJitterBounds(t *testing.T) {
	for _, tc := range []struct {
		b      Backoff
		n      int
		lo, hi time.Duration
	}{
		{Backoff{Initial: 100 * ms, Max: time.Second, Jitter: 0.5}, 1, 50 * ms, 100 * ms},
		{Backoff{Initial: 100 * ms, Max: time.Second, Jitter: 0.5}, 8, 500 * ms, time.Second},
		{Backoff{Initial: 100 * ms, Max: time.Second, Jitter: 0.2}, 2, 160 * ms, 200 * ms},
		{Backoff{Initial: 100 * ms, Max: time.Second, Jitter: 1}, 3, 0, 400 * ms},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := tc.b.Delay(tc.n)
			if d < tc.lo || d > tc.hi {
				t.Fatalf("%+v: Delay(%d) = %v, outside [%v, %v]", tc.b, tc.n, d, tc.lo, tc.hi)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("%+v: Delay(%d) gave one value in 200 draws: no jitter", tc.b, tc.n)
		}
	}
}

func TestSleep(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(live)
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"live context, short wait", live, ms, true},
		{"live context, no wait", live, 0, true},
		{"live context, negative wait", live, -time.Second, true},
		{"ended context, long wait", ended, time.Hour, false},
		{"ended context, no wait", ended, 0, false},
	} {
		start := time.Now()
		if got := Sleep(tc.ctx, tc.d); got != tc.want {
			t.Errorf("%s: Sleep = %t, want %t", tc.name, got, tc.want)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: Sleep took %v", tc.name, took)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*ms)
	defer cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep reported the whole hour waited")
	}
	if took := time.Since(start); took < 20*ms || took > 10*time.Second {
		t.Errorf("Sleep returned after %v, want about 20ms", took)
	}
}

// TestSleepOnAFakeClock: SleepOn waits on the clock it is given: it returns
// when a fake clock is moved past d, and not before; an ended context ends it.
func TestSleepOnAFakeClock(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	done := make(chan bool, 1)
	go func() { done <- SleepOn(context.Background(), fc, time.Hour) }()
	if !fc.BlockUntil(1, nil) {
		t.Fatal("SleepOn armed no timer on the fake clock")
	}
	fc.Advance(59 * time.Minute)
	select {
	case got := <-done:
		t.Fatalf("SleepOn returned %t before the clock reached the hour", got)
	case <-time.After(20 * ms):
	}
	fc.Advance(time.Minute)
	if !<-done {
		t.Error("SleepOn reported a wait cut short; the clock reached the hour")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- SleepOn(ctx, fc, time.Hour) }()
	fc.BlockUntil(1, nil)
	cancel()
	if <-done {
		t.Error("SleepOn reported the whole wait although its context ended")
	}
}
