package bus

import (
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// progressKeeper tells JetStream that the messages a worker holds are still
// being worked on: one goroutine and one ticker for all of them, instead of a
// timer per call, which most calls (answered in milliseconds) stop before it
// fires. The ticker ticks every half period; a message held across two ticks
// is signalled and starts over, so signals go out between half a period and a
// period apart, never longer.
type progressKeeper struct {
	every time.Duration // the longest time between two signals for one message
	log   *slog.Logger

	mu   sync.Mutex // protects tick and held
	tick uint64     // ticks so far
	held map[*heldMsg]struct{}
}

// heldMsg is one message being worked on.
type heldMsg struct {
	m        jetstream.Msg
	mu       sync.Mutex // held while a signal is sent, and by release
	released bool
	since    uint64 // the tick of its delivery or of its last signal (progressKeeper.mu)
}

func newProgressKeeper(every time.Duration, log *slog.Logger) *progressKeeper {
	return &progressKeeper{every: every, log: log, held: make(map[*heldMsg]struct{})}
}

// hold starts signalling for m until the returned message is released.
func (k *progressKeeper) hold(m jetstream.Msg) *heldMsg {
	h := &heldMsg{m: m}
	k.mu.Lock()
	h.since = k.tick
	k.held[h] = struct{}{}
	k.mu.Unlock()
	return h
}

// release stops the signals for h; none is sent once it returns.
func (k *progressKeeper) release(h *heldMsg) {
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
	k.mu.Lock()
	delete(k.held, h)
	k.mu.Unlock()
}

// run ticks until stop is closed.
func (k *progressKeeper) run(stop <-chan struct{}) {
	t := time.NewTicker(max(k.every/2, time.Millisecond))
	defer t.Stop()
	var due []*heldMsg
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		due = k.due(due[:0])
		for _, h := range due {
			h.mu.Lock()
			if !h.released {
				if err := h.m.InProgress(); err != nil {
					k.log.Debug("in-progress signal failed", "subject", h.m.Subject(), "error", err)
				}
			}
			h.mu.Unlock()
		}
		clear(due) // keep no message alive until the next tick
	}
}

// due counts a tick and appends to dst the messages held across two ticks
// since their delivery or their last signal, which start over.
func (k *progressKeeper) due(dst []*heldMsg) []*heldMsg {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tick++
	for h := range k.held {
		if k.tick-h.since >= 2 {
			h.since = k.tick
			dst = append(dst, h)
		}
	}
	return dst
}
