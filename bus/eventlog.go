package bus

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
)

// eventLog reads TOOLEXEC_EVENTS by subject, one message get at a time, for a
// client's attaches and a worker's check of a call delivered again. The
// stream's handle is looked up on first use and kept: a get names the stream,
// so the handle stays good if the stream is made again.
type eventLog struct {
	js jetstream.JetStream

	mu sync.Mutex       // protects st
	st jetstream.Stream // nil until first looked up
}

func newEventLog(js jetstream.JetStream) *eventLog { return &eventLog{js: js} }

// first returns the first event stored under filter, or an error matching
// jetstream.ErrMsgNotFound when there is none.
func (l *eventLog) first(ctx context.Context, filter string) (*jetstream.RawStreamMsg, error) {
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
