// Package clock abstracts time so that leases, retention and backoff can be tested
// without sleeping. [Real] is the wall clock; [Fake] moves only when told to.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that callers use: C delivers the time once
// the timer fires, and Stop prevents the timer from firing, reporting whether
// it stopped it. It is an alias of an unnamed interface so that a package that
// must not import this one (a store backend) can declare the same clock
// interface and have Real and *Fake satisfy it.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
}

// Real is the wall clock. Its zero value is ready to use.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// AfterFunc calls f, in a goroutine of its own, once d has passed on c, unless
// the returned stop is called first; stop reports whether it prevented the
// call. On the wall clock (Real) it is time.AfterFunc: no goroutine waits
// meanwhile. On another clock a goroutine waits on one of its timers, made
// before AfterFunc returns.
func AfterFunc(c Clock, d time.Duration, f func()) (stop func() bool) {
	if _, ok := c.(Real); ok {
		return time.AfterFunc(d, f).Stop
	}
	t := c.NewTimer(d)
	cancel := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-t.C():
			f()
		case <-cancel:
		}
	}()
	return func() bool {
		stopped := t.Stop()
		once.Do(func() { close(cancel) })
		return stopped
	}
}

// Fake is a clock that moves only when Advance or Set is called. Timers fire,
// in deadline order, when the clock reaches them. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex // protects now, timers and waiters
	now    time.Time
	timers []*fakeTimer
	// waiters are woken whenever a timer is added, for BlockUntil.
	waiters []chan struct{}
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the clock has advanced by d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		t.fired = true
		return t
	}
	f.timers = append(f.timers, t)
	for _, w := range f.waiters {
		close(w)
	}
	f.waiters = nil
	return t
}

// Advance moves the clock forward by d, firing every timer that falls due.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (never backwards), firing every timer that falls due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		return
	}
	f.now = t
	sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.at.After(t) {
			tm.fired = true
			tm.c <- tm.at
			continue
		}
		kept = append(kept, tm)
	}
	f.timers = kept
}

// Timers returns how many timers are waiting to fire.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil waits until at least n timers are waiting, or done is closed; it
// reports whether the count was reached. Tests use it to know that a goroutine is
// parked on the clock before advancing it.
func (f *Fake) BlockUntil(n int, done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return true
		}
		w := make(chan struct{})
		f.waiters = append(f.waiters, w)
		f.mu.Unlock()
		select {
		case <-w:
		case <-done:
			return false
		}
	}
}

type fakeTimer struct {
	f     *Fake
	at    time.Time
	c     chan time.Time
	fired bool // guarded by f.mu
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.fired {
		return false
	}
	for i, o := range t.f.timers {
		if o == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			t.fired = true
			return true
		}
	}
	return false
}
