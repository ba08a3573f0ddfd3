package mcpgate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// after collects what s.After yields, or its error.
func after(s *eventStore, session, stream string, index int) ([]string, error) {
	var out []string
	for d, err := range s.After(context.Background(), session, stream, index) {
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
	return out, nil
}

func TestEventStore(t *testing.T) {
	ctx := context.Background()
	clock := time.Unix(0, 0)
	newStore := func(maxBytes int) *eventStore {
		s := newEventStore(maxBytes, time.Minute)
		s.now = func() time.Time { return clock }
		return s
	}
	appendAll := func(s *eventStore, session, stream string, data ...string) {
		for _, d := range data {
			clock = clock.Add(time.Millisecond)
			if err := s.Append(ctx, session, stream, []byte(d)); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("replays after an index", func(t *testing.T) {
		s := newStore(1 << 10)
		_ = s.Open(ctx, "s1", "a")
		appendAll(s, "s1", "a", "", "one", "two")
		if got, err := after(s, "s1", "a", 0); err != nil || strings.Join(got, ",") != "one,two" {
			t.Errorf("After(0) = %q, %v", got, err)
		}
		if got, err := after(s, "s1", "a", 2); err != nil || len(got) != 0 {
			t.Errorf("After(last) = %q, %v; want nothing", got, err)
		}
		if _, err := after(s, "s1", "b", 0); err == nil {
			t.Error("After of an unknown stream: no error")
		}
	})

	t.Run("bytes: the stalest stream goes first, then the oldest events", func(t *testing.T) {
		s := newStore(10)
		_ = s.Open(ctx, "s1", "old")
		appendAll(s, "s1", "old", "aaaa")
		_ = s.Open(ctx, "s2", "new")
		appendAll(s, "s2", "new", "bbbb", "cccc")
		if _, err := after(s, "s1", "old", -1); err == nil {
			t.Error("the stalest stream was kept past the bound")
		}
		if got, _ := after(s, "s2", "new", -1); strings.Join(got, ",") != "bbbb,cccc" {
			t.Errorf("new stream = %q", got)
		}
		appendAll(s, "s2", "new", "dddd")
		if _, err := after(s, "s2", "new", -1); err == nil {
			t.Error("After from the start of a trimmed stream: no error")
		}
		if got, err := after(s, "s2", "new", 0); err != nil || strings.Join(got, ",") != "cccc,dddd" {
			t.Errorf("After(0) of the trimmed stream = %q, %v", got, err)
		}
		if s.bytes > 10 {
			t.Errorf("%d bytes kept, bound 10", s.bytes)
		}
	})

	t.Run("a session keeps its newest streams", func(t *testing.T) {
		s := newStore(1 << 20)
		_ = s.Open(ctx, "s1", "")
		for i := range maxSessionStreams + 1 {
			clock = clock.Add(time.Millisecond)
			_ = s.Open(ctx, "s1", fmt.Sprint(i))
		}
		if n := len(s.sessions["s1"]); n != maxSessionStreams {
			t.Errorf("%d streams kept, want %d", n, maxSessionStreams)
		}
		if _, ok := s.sessions["s1"]["0"]; ok {
			t.Error("the oldest stream was kept")
		}
		if _, ok := s.sessions["s1"][""]; !ok {
			t.Error("the standalone stream was dropped")
		}
	})

	t.Run("time: streams unchanged for longer than keep go", func(t *testing.T) {
		s := newStore(1 << 20)
		_ = s.Open(ctx, "s1", "")
		_ = s.Open(ctx, "s1", "a")
		appendAll(s, "s1", "a", "x")
		clock = clock.Add(2 * time.Minute)
		_ = s.Open(ctx, "s2", "b")
		if _, err := after(s, "s1", "a", -1); err == nil {
			t.Error("a stale stream was kept")
		}
		if _, err := after(s, "s1", "", -1); err != nil {
			t.Errorf("the standalone stream went with time: %v", err)
		}
		// A dropped stream's later events are not kept: resuming it is
		// refused rather than answered with a gap.
		appendAll(s, "s1", "a", "y")
		if _, err := after(s, "s1", "a", 0); err == nil {
			t.Error("a dropped stream came back")
		}
	})

	t.Run("a closed session's events go", func(t *testing.T) {
		s := newStore(1 << 20)
		_ = s.Open(ctx, "s1", "a")
		appendAll(s, "s1", "a", "xyz")
		_ = s.SessionClosed(ctx, "s1")
		if s.bytes != 0 || len(s.sessions) != 0 {
			t.Errorf("after SessionClosed: %d bytes, %d sessions", s.bytes, len(s.sessions))
		}
	})
}
