package toolexec

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// NewCallID returns a fresh call id: "call_" and 32 hex digits, 128 bits from
// crypto/rand, a token the wire accepts ([A-Za-z0-9_-]{1,128}). Nobody can guess
// it, so no other caller can take it first.
func NewCallID() string { return newID("call_") }

// newID returns prefix and 32 hex digits of randomness.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	return prefix + hex.EncodeToString(b[:])
}

// sentIDs counts the call ids a client chose itself (WithCallID) and published
// within a window, each under its tenant and tool (see sentKey), so that a
// refusal because a call of that tenant, tool and id waits in the calls stream
// can be told apart: the client's own earlier call, whose answer it may wait
// for, or another publisher's, whose answer is not this caller's. Fresh ids
// are not kept: nobody else can know them.
type sentIDs struct {
	window time.Duration
	mu     sync.Mutex        // protects ids and sweepAt
	ids    map[string]sentID // sentKey → its publications within the window
	// sweepAt is when ids is next cleared of ids not published within window.
	sweepAt time.Time
}

// sentID is what a client knows of one id it published.
type sentID struct {
	last time.Time // the latest publication
	n    int       // publications since the first within the window
}

func newSentIDs(window time.Duration) *sentIDs {
	return &sentIDs{window: window, ids: map[string]sentID{}}
}

// add records that id is being published now.
func (s *sentIDs) add(id string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.ids[id]
	if now.Sub(e.last) > s.window {
		e.n = 0
	}
	s.ids[id] = sentID{last: now, n: e.n + 1}
	if now.Before(s.sweepAt) {
		return
	}
	for k, e := range s.ids {
		if now.Sub(e.last) > s.window {
			delete(s.ids, k)
		}
	}
	s.sweepAt = now.Add(s.window)
}

// undo takes back the latest add of id: that publication was refused, and
// must not make a later one look like the client's own repeat.
func (s *sentIDs) undo(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ids[id]
	switch {
	case !ok:
	case e.n <= 1:
		delete(s.ids, id)
	default:
		e.n--
		s.ids[id] = e
	}
}

// count returns how many times id was published, counting from the first
// publication within the window of the latest; 0 if it was not published
// within the window.
func (s *sentIDs) count(id string, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ids[id]
	if !ok || now.Sub(e.last) > s.window {
		return 0
	}
	return e.n
}

// size is how many ids are kept, for tests.
func (s *sentIDs) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}
