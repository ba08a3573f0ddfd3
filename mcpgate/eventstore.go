package mcpgate

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxSessionStreams bounds the streams whose events one session keeps: a
// session that opened more (one per request that waited for an answer) loses
// those of its oldest. The session's standalone stream (the GET, id "") is
// bounded by bytes only.
const maxSessionStreams = 64

// eventStore keeps the events of the gateway's Streamable HTTP responses so
// that a client whose stream ended (the gateway closed it, or the connection
// broke) can resume it with Last-Event-ID. It is bounded three ways: maxBytes
// of event data in all (the streams whose last event is oldest go first), at
// most maxSessionStreams streams per session, and no stream kept longer than
// keep after its last event. A resumption that asks for events no longer kept
// is refused, and a session's events go when the session closes. The
// standalone stream of a session (id "", the GET) is dropped for bytes only.
type eventStore struct {
	maxBytes int
	keep     time.Duration
	now      func() time.Time

	mu        sync.Mutex // protects the fields below
	bytes     int        // event data held, in all
	sessions  map[string]map[string]*streamEvents
	lastSweep time.Time
}

var _ mcp.EventStore = (*eventStore)(nil)

// streamEvents is what one stream keeps: its events from index first on.
type streamEvents struct {
	first  int
	data   [][]byte
	size   int
	opened time.Time
	last   time.Time // when it last changed
}

func newEventStore(maxBytes int, keep time.Duration) *eventStore {
	return &eventStore{maxBytes: maxBytes, keep: keep, now: time.Now, sessions: map[string]map[string]*streamEvents{}}
}

// Open makes the stream's record, dropping the session's oldest stream when
// it holds maxSessionStreams already.
func (s *eventStore) Open(_ context.Context, sessionID, streamID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep()
	s.stream(sessionID, streamID)
	return nil
}

// stream returns the record of a stream, made if it has none. s.mu is held.
func (s *eventStore) stream(sessionID, streamID string) *streamEvents {
	streams := s.sessions[sessionID]
	if streams == nil {
		streams = map[string]*streamEvents{}
		s.sessions[sessionID] = streams
	}
	st := streams[streamID]
	if st == nil {
		if len(streams) >= maxSessionStreams {
			var oldest *streamEvents
			oldestID := ""
			for id, o := range streams {
				if id != "" && (oldest == nil || o.opened.Before(oldest.opened)) {
					oldest, oldestID = o, id
				}
			}
			s.drop(sessionID, oldestID)
		}
		now := s.now()
		st = &streamEvents{opened: now, last: now}
		streams[streamID] = st
	}
	return st
}

// Append keeps one more event of a stream, after making room for it.
func (s *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep()
	st := s.sessions[sessionID][streamID]
	if st == nil {
		// Dropped since Open: its events are sent, not kept, so that a
		// resumption is refused rather than answered with a gap.
		return nil
	}
	st.data = append(st.data, data)
	st.size += len(data)
	st.last = s.now()
	s.bytes += len(data)
	for s.bytes > s.maxBytes {
		sess, id, ok := s.stalest(sessionID, streamID)
		if !ok {
			break
		}
		s.drop(sess, id)
	}
	// Still too much: the stream being written gives up its oldest events,
	// keeping its newest.
	for s.bytes > s.maxBytes && len(st.data) > 1 {
		s.bytes -= len(st.data[0])
		st.size -= len(st.data[0])
		st.data[0] = nil
		st.data = st.data[1:]
		st.first++
	}
	return nil
}

// After yields the events of a stream after index, or an error when some of
// them are no longer kept.
func (s *eventStore) After(_ context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	var (
		out []([]byte)
		err error
	)
	st := s.sessions[sessionID][streamID]
	switch {
	case st == nil:
		err = fmt.Errorf("mcpgate: the events of stream %s are no longer kept", streamID)
	case index+1 < st.first:
		err = fmt.Errorf("mcpgate: stream %s: the events after %d are no longer all kept", streamID, index)
	case index+1-st.first < len(st.data):
		out = append(out, st.data[index+1-st.first:]...)
	}
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range out {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed forgets the events of a session.
func (s *eventStore) SessionClosed(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.sessions[sessionID] {
		s.drop(sessionID, id)
	}
	delete(s.sessions, sessionID)
	return nil
}

// drop forgets one stream. s.mu is held.
func (s *eventStore) drop(sessionID, streamID string) {
	streams := s.sessions[sessionID]
	if st := streams[streamID]; st != nil {
		s.bytes -= st.size
		delete(streams, streamID)
	}
	if len(streams) == 0 {
		delete(s.sessions, sessionID)
	}
}

// stalest returns the stream holding data whose last event is the oldest,
// other than the one named by (curSession, curStream); false when there is
// none. s.mu is held.
func (s *eventStore) stalest(curSession, curStream string) (sessionID, streamID string, ok bool) {
	var at time.Time
	for sess, streams := range s.sessions {
		for id, st := range streams {
			if st.size == 0 || (sess == curSession && id == curStream) {
				continue // dropping it would free nothing
			}
			if !ok || st.last.Before(at) {
				sessionID, streamID, at, ok = sess, id, st.last, true
			}
		}
	}
	return sessionID, streamID, ok
}

// sweep forgets the streams unchanged for longer than keep, looking at most
// once per tenth of keep. s.mu is held.
func (s *eventStore) sweep() {
	now := s.now()
	if now.Sub(s.lastSweep) < s.keep/10 {
		return
	}
	s.lastSweep = now
	for sess, streams := range s.sessions {
		for id, st := range streams {
			if id != "" && now.Sub(st.last) > s.keep {
				s.drop(sess, id)
			}
		}
	}
}
