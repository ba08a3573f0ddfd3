// Package eventlog reads the answers stored in TOOLEXEC_EVENTS by subject, one
// message get at a time: how a client finds the answer to a call published
// before, and how an executor checks whether a call delivered again was
// answered already. A get makes no consumer, so reads leave nothing behind on
// the server.
package eventlog

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
)

// Log reads TOOLEXEC_EVENTS by subject. The stream's handle is looked up on
// first use and kept: a get names the stream, so the handle stays good if the
// stream is made again. It is safe for concurrent use.
type Log struct {
	js jetstream.JetStream

	mu sync.Mutex       // protects st
	st jetstream.Stream // nil until first looked up
}

// New returns a Log that reads through js.
func New(js jetstream.JetStream) *Log { return &Log{js: js} }

// First returns the first event stored under filter. It returns an error
// matching jetstream.ErrMsgNotFound when there is none, and JetStream's error
// when the stream cannot be looked up or read.
func (l *Log) First(ctx context.Context, filter string) (*jetstream.RawStreamMsg, error) {
	l.mu.Lock()
	st := l.st
	l.mu.Unlock()
	if st == nil {
		var err error
		if st, err = l.js.Stream(ctx, wire.EventStream); err != nil {
			return nil, err
		}
		l.mu.Lock()
		l.st = st
		l.mu.Unlock()
	}
	return st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(filter))
}
