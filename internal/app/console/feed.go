package console

import (
	"context"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tesserix/toolexec/events"
)

// feedKinds are the events the live feed shows: every answer kind, and the
// resolutions.
var feedKinds = events.Kinds()

// routineSince is how far back the feed starts for the kinds an operator does
// not act on.
const routineSince = 5 * time.Minute

// actionable reports whether events of kind k are what an operator acts on
// (indeterminate answers) or its record (resolutions): the feed keeps them
// longest.
func actionable(k events.Kind) bool { return k == events.KindIndeterminate || k == events.KindResolved }

// maxFeedOutcome bounds the outcome text an item carries.
const maxFeedOutcome = 200

// Item is one event of the live feed, as the page and its script show it. It
// carries the event's addressing and the outcome (cut), never arguments — no
// event holds them.
type Item struct {
	ID          uint64        `json:"id"`
	Kind        events.Kind   `json:"kind"`
	Tenant      string        `json:"tenant"`
	Tool        string        `json:"tool,omitempty"`
	RunID       string        `json:"run_id,omitempty"`
	CallID      string        `json:"call_id,omitempty"`
	Key         string        `json:"key,omitempty"`
	Reason      events.Reason `json:"reason,omitempty"`
	BodyEntered bool          `json:"body_entered,omitempty"`
	Outcome     string        `json:"outcome,omitempty"`
	Action      events.Action `json:"action,omitempty"`
	Operator    string        `json:"operator,omitempty"`
	Error       string        `json:"error,omitempty"`
	Code        string        `json:"code,omitempty"`
	Time        time.Time     `json:"time"`
	// Settled says, for an indeterminate item, what later resolved its key
	// (the pages fill it in; the stream's script does the same).
	Settled string `json:"-"`
}

func itemOf(a events.Answer) Item {
	it := Item{
		Kind: a.Kind, Tenant: a.Tenant, Tool: a.Tool, RunID: a.RunID, CallID: a.CallID, Key: a.Key,
		Reason: a.Reason, BodyEntered: a.BodyEntered, Outcome: cutText(a.Outcome, maxFeedOutcome),
		Action: a.Action, Operator: a.Operator, Error: cutText(a.Error, maxFeedOutcome), Code: string(a.Code), Time: a.Time,
	}
	if it.Time.IsZero() {
		it.Time = time.Now().UTC()
	}
	return it
}

// cutText shortens s to at most n bytes on a character boundary, marking the cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// hub keeps the latest items (the actionable ones longest) and hands new
// ones to subscribers.
type hub struct {
	size int

	mu     sync.Mutex // protects the fields below
	items  []Item     // the latest, oldest first, at most size
	nextID uint64
	subs   map[chan Item]struct{}
}

func newHub(size int) *hub {
	return &hub{size: size, nextID: 1, subs: map[chan Item]struct{}{}}
}

// add numbers it, keeps it and sends it to every subscriber. A subscriber too
// slow to take it is dropped (its channel closed): its page reconnects and
// catches up from the kept items.
func (h *hub) add(it Item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	it.ID = h.nextID
	h.nextID++
	h.items = append(h.items, it)
	if len(h.items) > h.size {
		// Drop the oldest routine item, so that a stream of completed answers
		// does not push out what waits for an operator; the oldest item when
		// every kept item is actionable.
		drop := 0
		for i, kept := range h.items {
			if !actionable(kept.Kind) {
				drop = i
				break
			}
		}
		h.items = slices.Delete(h.items, drop, drop+1)
	}
	for ch := range h.subs {
		select {
		case ch <- it:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// since returns the kept items with an ID above after, oldest first.
func (h *hub) since(after uint64) []Item {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Item
	for _, it := range h.items {
		if it.ID > after {
			out = append(out, it)
		}
	}
	return out
}

// subscribe returns the items kept after after, and a channel of the ones to
// come, with no gap between the two; cancel stops the subscription.
func (h *hub) subscribe(after uint64) (backlog []Item, ch <-chan Item, cancel func()) {
	c := make(chan Item, 64)
	h.mu.Lock()
	for _, it := range h.items {
		if it.ID > after {
			backlog = append(backlog, it)
		}
	}
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return backlog, c, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[c]; ok {
			delete(h.subs, c)
			close(c)
		}
	}
}

// follow feeds the hub from the watches until ctx ends.
func (h *hub) follow(ctx context.Context, chans []<-chan events.Answer, wg *sync.WaitGroup) {
	for _, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case a, ok := <-ch:
					if !ok {
						return
					}
					h.add(itemOf(a))
				case <-ctx.Done():
					return
				}
			}
		}()
	}
}
