package bus

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// signalMsg counts the in-progress signals sent for it.
type signalMsg struct {
	jetstream.Msg
	signals atomic.Int64
}

func (m *signalMsg) InProgress() error { m.signals.Add(1); return nil }
func (m *signalMsg) Subject() string   { return "toolexec.calls.t.tool" }

// TestProgressKeeperTicks drives the keeper's ticks by hand: a message is
// signalled once it has been held across two ticks, then again two ticks
// later, and never after its release.
func TestProgressKeeperTicks(t *testing.T) {
	k := newProgressKeeper(time.Hour, slog.New(slog.DiscardHandler))
	a, b := &signalMsg{}, &signalMsg{}
	ha := k.hold(a)
	tick := func() []*heldMsg { return k.due(nil) }
	if due := tick(); len(due) != 0 {
		t.Fatalf("after one tick %d due, want none", len(due))
	}
	hb := k.hold(b)
	if due := tick(); len(due) != 1 || due[0] != ha {
		t.Fatalf("after two ticks: %v due, want a alone", due)
	}
	if due := tick(); len(due) != 1 || due[0] != hb {
		t.Fatalf("third tick: %v due, want b alone", due)
	}
	if due := tick(); len(due) != 1 || due[0] != ha {
		t.Fatalf("fourth tick: %v due, want a again", due)
	}
	k.release(ha)
	k.release(hb)
	for range 4 {
		if due := tick(); len(due) != 0 {
			t.Fatalf("released messages still due: %v", due)
		}
	}
	if n := len(k.held); n != 0 {
		t.Fatalf("%d messages still held", n)
	}
}

// TestProgressKeeperSignals runs the keeper with its ticker: a message held
// for a few periods gets signals at least once a period, and none after its
// release.
func TestProgressKeeperSignals(t *testing.T) {
	const every = 20 * time.Millisecond
	k := newProgressKeeper(every, slog.New(slog.DiscardHandler))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); k.run(stop) }()
	defer func() { close(stop); <-done }()

	m := &signalMsg{}
	h := k.hold(m)
	time.Sleep(10 * every)
	k.release(h)
	n := m.signals.Load()
	// Ten periods held: at least one signal a period less the first, at most
	// two (one every half period); a loaded machine delays ticks, so only the
	// bounds that cannot be late are checked strictly.
	if n < 1 || n > 20 {
		t.Fatalf("%d signals in 10 periods, want between 1 and 20", n)
	}
	time.Sleep(5 * every)
	if after := m.signals.Load(); after != n {
		t.Fatalf("%d signals after the release", after-n)
	}
}
