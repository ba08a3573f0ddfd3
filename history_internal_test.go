package toolexec

import (
	"fmt"
	"testing"
)

// TestIDWindow: the window recognises the ids it holds, forgets the oldest
// once full, and never holds more than its bound.
func TestIDWindow(t *testing.T) {
	const n = 4
	w := newIDWindow(n)
	for i := range n {
		if !w.add(fmt.Sprint(i)) {
			t.Fatalf("id %d not new", i)
		}
	}
	if w.add("0") || w.add("3") {
		t.Fatal("an id held was taken as new")
	}
	for i := n; i < 3*n; i++ {
		if !w.add(fmt.Sprint(i)) {
			t.Fatalf("id %d not new", i)
		}
		if len(w.ids) > n || len(w.ring) > n {
			t.Fatalf("after %d ids the window holds %d (%d in the ring), bound %d", i+1, len(w.ids), len(w.ring), n)
		}
		if w.add(fmt.Sprint(i - n + 1)) {
			t.Fatalf("after id %d: id %d, still within the window, taken as new", i, i-n+1)
		}
	}
	// The ids before the last n are forgotten: heard again, they count as new.
	if !w.add(fmt.Sprint(2*n - 1)) {
		t.Error("an id older than the window was recognised")
	}
}
