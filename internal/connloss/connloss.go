// Package connloss ends the waits of requests whose NATS connection was lost.
//
// A request's reply is routed to the connection that sent it. When that
// connection drops (its server was killed, say) and the client reconnects to
// another server, a reply still on its way is routed to a connection that no
// longer exists: the request waits out its whole timeout for nothing. A
// publication to JetStream that is safe to repeat (it carries a message id
// that makes a second copy a duplicate) should instead be sent again at once,
// on the new connection.
package connloss

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrLost is the cause of a context that Context ended.
var ErrLost = errors.New("connloss: the NATS connection was lost")

// watchers holds the watcher of each connection asked about, until it closes.
var watchers sync.Map // *nats.Conn → *watcher

// watcher keeps the context of a connection's current life.
type watcher struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Context returns a context that ends, with cause ErrLost, when nc is next
// lost: it starts reconnecting, or it is closed. One goroutine per connection
// watches it, until the connection closes.
func Context(nc *nats.Conn) context.Context {
	if w, ok := watchers.Load(nc); ok {
		return w.(*watcher).current()
	}
	w := &watcher{}
	w.ctx, w.cancel = context.WithCancelCause(context.Background())
	if prev, loaded := watchers.LoadOrStore(nc, w); loaded {
		return prev.(*watcher).current()
	}
	events := nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	if nc.IsClosed() { // closed before the listener was registered
		nc.RemoveStatusListener(events)
		watchers.Delete(nc)
		return w.lost(true)
	}
	go func() {
		for st := range events {
			if st == nats.CLOSED {
				w.lost(true)
				nc.RemoveStatusListener(events)
				watchers.Delete(nc)
				return
			}
			w.lost(false)
		}
	}()
	return w.current()
}

// Attempt returns a context for one try of a request on nc: it ends after d,
// when ctx ends, or when nc is lost. Its CancelFunc must be called.
func Attempt(ctx context.Context, nc *nats.Conn, d time.Duration) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithTimeout(ctx, d)
	stop := context.AfterFunc(Context(nc), cancel)
	return actx, func() {
		stop()
		cancel()
	}
}

// current returns the context of the connection's current life.
func (w *watcher) current() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctx
}

// lost ends the current life's context and, unless the connection is closed
// for good, starts the next. It returns the context it ended.
func (w *watcher) lost(closed bool) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	ended := w.ctx
	w.cancel(ErrLost)
	if !closed {
		w.ctx, w.cancel = context.WithCancelCause(context.Background())
	}
	return ended
}
