package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tesserix/toolexec/tool/httptool"
)

// Witness is the external witness of a fault scenario: an HTTP downstream, in
// the style of a booking API, that logs every request it receives as an
// [Effect] — at arrival, before it answers, because that is when the effect
// lands — with its Idempotency-Key, call id, tool and the executor that sent
// it. Each executor's tools point at their own URL ([Witness.URL]), which is how
// the witness knows who sent a request.
//
// Its answer is the same for every request of one key and tool, so that
// repeated runs of an Idempotent tool agree. It can hold the requests of an
// executor (the answer waits until [Witness.Release], or until the client goes
// away — killed, say) and delay every answer.
type Witness struct {
	srv *httptest.Server

	mu      sync.Mutex // protects the fields below
	effects []Effect
	held    map[string]map[int]Effect // executor -> held requests by sequence
	holding map[string]chan struct{}  // executor -> closed on Release
	parked  map[string]chan struct{}  // executor -> held requests' channel after StopHolding
	delay   time.Duration
	seq     int
	changed chan struct{} // closed and replaced whenever held changes
}

// NewWitness starts a witness on a random port of 127.0.0.1. Close it when done.
func NewWitness() *Witness {
	w := &Witness{
		held:    map[string]map[int]Effect{},
		holding: map[string]chan struct{}{},
		parked:  map[string]chan struct{}{},
		changed: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /e/{executor}/{tool}", w.serve)
	w.srv = httptest.NewServer(mux)
	return w
}

// Close stops the witness, releasing every held request first.
func (w *Witness) Close() {
	w.mu.Lock()
	for _, m := range []map[string]chan struct{}{w.holding, w.parked} {
		for exec, ch := range m {
			close(ch)
			delete(m, exec)
		}
	}
	w.mu.Unlock()
	w.srv.CloseClientConnections()
	w.srv.Close()
}

// URL returns the URL the executor named executor should use for tool.
func (w *Witness) URL(executor, tool string) string {
	return fmt.Sprintf("%s/e/%s/%s", w.srv.URL, executor, tool)
}

// Hold makes the witness keep every request from executor waiting for its
// answer (the effect is logged on arrival) until Release or until the client
// disconnects.
func (w *Witness) Hold(executor string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.holding[executor]; !ok {
		w.holding[executor] = make(chan struct{})
	}
}

// StopHolding lets new requests from executor through, while those held so
// far stay held until Release.
func (w *Witness) StopHolding(executor string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.holding[executor]; ok {
		w.parked[executor] = ch
		delete(w.holding, executor)
	}
}

// Release answers every request held from executor, and stops holding new ones.
func (w *Witness) Release(executor string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range []map[string]chan struct{}{w.holding, w.parked} {
		if ch, ok := m[executor]; ok {
			close(ch)
			delete(m, executor)
		}
	}
}

// SetDelay makes the witness wait d before answering each request (the effect
// is logged on arrival).
func (w *Witness) SetDelay(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.delay = d
}

// Effects returns every request received so far, in order of arrival.
func (w *Witness) Effects() []Effect {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.effects)
}

// Held returns the requests from executor held right now.
func (w *Witness) Held(executor string) []Effect {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Effect, 0, len(w.held[executor]))
	for _, e := range w.held[executor] {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Effect) int { return a.At.Compare(b.At) })
	return out
}

// WaitHeld waits until at least n requests from executor are held, and returns
// them; or returns ctx's error.
func (w *Witness) WaitHeld(ctx context.Context, executor string, n int) ([]Effect, error) {
	for {
		w.mu.Lock()
		count, changed := len(w.held[executor]), w.changed
		w.mu.Unlock()
		if count >= n {
			return w.Held(executor), nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("faults: %d of %d requests from %s held: %w", count, n, executor, ctx.Err())
		}
	}
}

func (w *Witness) serve(rw http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	e := Effect{
		Key:      r.Header.Get(httptool.HeaderIdempotencyKey),
		CallID:   r.Header.Get(httptool.HeaderCallID),
		Tool:     r.Header.Get(httptool.HeaderTool),
		Executor: r.PathValue("executor"),
		At:       time.Now(),
	}
	w.mu.Lock()
	w.effects = append(w.effects, e)
	hold, holding := w.holding[e.Executor]
	delay := w.delay
	w.seq++
	seq := w.seq
	if holding {
		if w.held[e.Executor] == nil {
			w.held[e.Executor] = map[int]Effect{}
		}
		w.held[e.Executor][seq] = e
		w.notifyLocked()
	}
	w.mu.Unlock()

	if holding {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		w.mu.Lock()
		delete(w.held[e.Executor], seq)
		w.notifyLocked()
		w.mu.Unlock()
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	if r.Context().Err() != nil {
		return
	}
	rw.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(rw, Outcome(e.Tool, e.Key))
}

func (w *Witness) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Outcome is the witness's answer to every request of tool with key: what a
// completed call's outcome should be.
func Outcome(tool, key string) string {
	return strings.Join([]string{tool, "done", short(key)}, " ")
}
