package clock

import (
	"testing"
	"time"
)

func TestAfterFuncFake(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	fired := make(chan struct{}, 2)
	AfterFunc(f, time.Second, func() { fired <- struct{}{} })
	stop := AfterFunc(f, 2*time.Second, func() { fired <- struct{}{} })
	if n := f.Timers(); n != 2 {
		t.Fatalf("%d timers waiting, want 2 as soon as AfterFunc returns", n)
	}
	f.Advance(time.Second)
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the first function was not called")
	}
	if !stop() {
		t.Fatal("stop before the deadline did not report stopping it")
	}
	if stop() {
		t.Fatal("a second stop reported stopping it again")
	}
	f.Advance(time.Hour)
	select {
	case <-fired:
		t.Fatal("a stopped function was called")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestAfterFuncReal(t *testing.T) {
	fired := make(chan struct{})
	AfterFunc(Real{}, time.Millisecond, func() { close(fired) })
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the function was not called")
	}
	stop := AfterFunc(Real{}, time.Hour, func() { t.Error("a stopped function was called") })
	if !stop() {
		t.Fatal("stop before the deadline did not report stopping it")
	}
}
