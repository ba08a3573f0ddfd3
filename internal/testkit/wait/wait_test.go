package wait

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records a test's failure instead of ending it.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestUntil(t *testing.T) {
	var n atomic.Int32
	if !Until(time.Second, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("a condition that holds at the fifth check was not seen")
	}
	start := time.Now()
	if Until(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported held")
	}
	if waited := time.Since(start); waited < 50*time.Millisecond || waited > time.Second {
		t.Fatalf("gave up after %s, want about 50ms", waited)
	}
	n.Store(0)
	if !Until(0, func() bool { return n.Add(1) == 1 }) || n.Load() != 1 {
		t.Fatal("with no time, cond is still checked once")
	}
}

func TestEventuallyFails(t *testing.T) {
	f := &fakeTB{}
	Eventually(f, 30*time.Millisecond, "the moon", func() bool { return false })
	if f.failed != "still waiting after 30ms for the moon" {
		t.Fatalf("failed with %q", f.failed)
	}
	f = &fakeTB{}
	Eventually(f, time.Second, "nothing", func() bool { return true })
	if f.failed != "" {
		t.Fatalf("failed with %q", f.failed)
	}
}

func TestEventuallyNoErrorSaysLastError(t *testing.T) {
	f := &fakeTB{}
	var n atomic.Int32
	EventuallyNoError(f, 30*time.Millisecond, "the count", func() error {
		if n.Add(1) == 1 {
			return errors.New("first")
		}
		return errors.New("later")
	})
	if f.failed != "still waiting after 30ms for the count: later" {
		t.Fatalf("failed with %q", f.failed)
	}
	f = &fakeTB{}
	n.Store(0)
	EventuallyNoError(f, time.Second, "the third", func() error {
		if n.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if f.failed != "" {
		t.Fatalf("failed with %q", f.failed)
	}
}
