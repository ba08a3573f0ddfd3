package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// sessionIDBytes is how much randomness a session id carries: 256 bits.
const sessionIDBytes = 32

// sessionIDLen is the length of a session id: sessionIDBytes in base64url
// without padding. An id of another length was never issued.
var sessionIDLen = base64.RawURLEncoding.EncodedLen(sessionIDBytes)

// newSessionID returns a fresh random session id.
func newSessionID() string {
	b := make([]byte, sessionIDBytes)
	// crypto/rand.Read never returns an error: it crashes the program instead.
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// session is a signed-in browser.
type session struct {
	id      Identity  // who signed in
	created time.Time // sign-in
	used    time.Time // the latest request
}

// sessions are the console's signed-in browsers, kept in memory only: a
// restart signs everyone out. They are found by the SHA-256 of their id, so
// that looking one up takes time that depends on the hash of what the browser
// sent, never on how much of a live id it guessed.
type sessions struct {
	idle     time.Duration // a session unused this long has ended
	lifetime time.Duration // a session this old has ended, however busy
	max      int           // sessions kept at once

	mu   sync.Mutex // protects byID
	byID map[[sha256.Size]byte]*session
}

func newSessions(idle, lifetime time.Duration, max int) *sessions {
	return &sessions{idle: idle, lifetime: lifetime, max: max, byID: map[[sha256.Size]byte]*session{}}
}

func sessionKey(id string) [sha256.Size]byte { return sha256.Sum256([]byte(id)) }

// ended reports whether s has expired at now.
func (ss *sessions) ended(s *session, now time.Time) bool {
	return now.Sub(s.used) >= ss.idle || now.Sub(s.created) >= ss.lifetime
}

// create starts a session for id and returns the session's id. It first drops the
// sessions that have ended and, when the console keeps as many as it may, the
// oldest.
func (ss *sessions) create(who Identity, now time.Time) string {
	id := newSessionID()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweep(now)
	if len(ss.byID) >= ss.max {
		ss.dropOldest()
	}
	ss.byID[sessionKey(id)] = &session{id: who, created: now, used: now}
	return id
}

// sweep drops the sessions that have ended at now.
func (ss *sessions) sweep(now time.Time) {
	for k, s := range ss.byID {
		if ss.ended(s, now) {
			delete(ss.byID, k)
		}
	}
}

// dropOldest drops the session signed in first.
func (ss *sessions) dropOldest() {
	var oldest [sha256.Size]byte
	var first *session
	for k, s := range ss.byID {
		if first == nil || s.created.Before(first.created) {
			oldest, first = k, s
		}
	}
	delete(ss.byID, oldest)
}

// find returns the live session with id at now, dropping it if it has ended.
// The caller holds ss.mu.
func (ss *sessions) find(id string, now time.Time) *session {
	if len(id) != sessionIDLen {
		return nil
	}
	k := sessionKey(id)
	s := ss.byID[k]
	if s != nil && ss.ended(s, now) {
		delete(ss.byID, k)
		return nil
	}
	return s
}

// use returns who signed in to the live session with id and marks it used
// at now; ok is false when there is no such session (never issued, ended or
// signed out).
func (ss *sessions) use(id string, now time.Time) (who Identity, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.find(id, now)
	if s == nil {
		return Identity{}, false
	}
	s.used = now
	return s.id, true
}

// alive reports whether the session with id is live at now, without marking
// it used: an open event stream is not an operator at the console.
func (ss *sessions) alive(id string, now time.Time) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.find(id, now) != nil
}

// end signs the session with id out and returns its operator; ok is false
// when there was no such session.
func (ss *sessions) end(id string) (operator string, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(id) != sessionIDLen {
		return "", false
	}
	k := sessionKey(id)
	s := ss.byID[k]
	if s == nil {
		return "", false
	}
	delete(ss.byID, k)
	return s.id.Name, true
}
