package toolexec

import (
	"testing"
	"time"
)

func TestSentIDs(t *testing.T) {
	const window = 2 * time.Minute
	t0 := time.Unix(1_700_000_000, 0)
	s := newSentIDs(window)
	if n := s.count("a", t0); n != 0 {
		t.Fatalf("count of an id never sent = %d", n)
	}
	s.add("a", t0)
	if n := s.count("a", t0.Add(time.Second)); n != 1 {
		t.Errorf("after one publication: %d", n)
	}
	s.add("a", t0.Add(time.Minute))
	if n := s.count("a", t0.Add(time.Minute)); n != 2 {
		t.Errorf("after a retry within the window: %d", n)
	}
	if n := s.count("a", t0.Add(time.Minute+window+time.Second)); n != 0 {
		t.Errorf("past the window: %d", n)
	}
	// A refused publication is taken back: it does not count towards the next.
	s.add("b", t0)
	s.undo("b")
	if n := s.count("b", t0); n != 0 {
		t.Errorf("after a refused first publication: %d", n)
	}
	s.add("b", t0)
	s.add("b", t0)
	s.undo("b")
	if n := s.count("b", t0); n != 1 {
		t.Errorf("after a refused second publication: %d", n)
	}
	s.undo("never")

	// Published again after the window: it counts as a first publication.
	s.add("a", t0.Add(10*time.Minute))
	if n := s.count("a", t0.Add(10*time.Minute)); n != 1 {
		t.Errorf("published again after the window: %d", n)
	}

	// Ids older than the window are dropped as others are added.
	for i := range 100 {
		s.add(string(rune('A'+i%26))+time.Duration(i).String(), t0.Add(10*time.Minute))
	}
	s.add("late", t0.Add(10*time.Minute+window+time.Second))
	if n := s.size(); n != 1 {
		t.Errorf("%d ids kept after the window passed, want 1", n)
	}
}
