package natstool

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// replyQueue is room for replies the filing goroutine has not taken yet; one
// that finds it full is dropped by the client (a slow consumer), and its call
// ends without a reply, so it is large.
const replyQueue = 1 << 16

// replies is where the requests sent on one connection get their replies:
// one wildcard subscription, <inbox>.*, made at the first request, and a
// reply subject <inbox>.<n> for each request. A goroutine files each reply under its
// request. A request is forgotten when its call returns, or, when someone
// listens for extra replies, ExtraReplyWindow later, so that a second reply to
// it is counted; a reply to a request forgotten, or to none, is dropped.
//
// The subscription is a channel one because the client counts a message
// delivered to a channel as it reads it off the socket: after a flush, the
// count covers every reply the server sent before its PONG, and [replies.caughtUp]
// waits until the goroutine has filed that many.
type replies struct {
	nc *nats.Conn

	start  sync.Once
	prefix string // <inbox>.
	sub    *nats.Subscription
	err    error // from subscribing

	mu      sync.Mutex
	moved   *sync.Cond // filed or stopped changed
	filed   int64      // replies taken off the channel
	stopped bool       // the connection closed; nothing is filed any more
	next    uint64
	waiting map[string]*waiter
}

// waiter is one request's end of the subscription.
type waiter struct {
	first   chan *nats.Msg // the first reply, buffered
	n       int            // replies heard
	subject string         // the request's, for onExtra
	onExtra func(subject string)
}

// muxes holds the replies of each connection that sent a request, until it
// closes.
var muxes sync.Map // *nats.Conn → *replies

// repliesOf returns nc's replies.
func repliesOf(nc *nats.Conn) *replies {
	if r, ok := muxes.Load(nc); ok {
		return r.(*replies)
	}
	r, _ := muxes.LoadOrStore(nc, &replies{nc: nc})
	return r.(*replies)
}

// open makes the subscription and starts the filing once; every request after
// a failed one fails alike.
func (r *replies) open() error {
	r.start.Do(func() {
		r.prefix = r.nc.NewInbox() + "."
		r.waiting = map[string]*waiter{}
		r.moved = sync.NewCond(&r.mu)
		ch := make(chan *nats.Msg, replyQueue)
		closed := r.nc.StatusChanged(nats.CLOSED)
		if r.sub, r.err = r.nc.ChanSubscribe(r.prefix+"*", ch); r.err != nil {
			r.nc.RemoveStatusListener(closed)
			return
		}
		go r.file(ch, closed)
	})
	return r.err
}

// file files each reply until the connection closes.
func (r *replies) file(ch <-chan *nats.Msg, closed <-chan nats.Status) {
	defer func() {
		muxes.Delete(r.nc)
		r.mu.Lock()
		r.stopped = true
		r.moved.Broadcast()
		r.mu.Unlock()
	}()
	for {
		select {
		case m := <-ch:
			r.heard(m)
		case <-closed:
			return
		}
	}
}

// heard files a reply: the first to its request's channel, the second told to
// onExtra, any other dropped.
func (r *replies) heard(m *nats.Msg) {
	token := strings.TrimPrefix(m.Subject, r.prefix)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.filed++
	r.moved.Broadcast()
	w := r.waiting[token]
	if w == nil {
		return
	}
	w.n++
	switch {
	case w.n == 1:
		w.first <- m // room for one, and only the first is sent
	case w.n == 2 && w.onExtra != nil:
		go w.onExtra(w.subject)
	}
}

// add returns the reply subject of a new request on subject, and where its
// first reply comes; onExtra, when set, hears of a second.
func (r *replies) add(subject string, onExtra func(string)) (string, *waiter) {
	w := &waiter{first: make(chan *nats.Msg, 1), subject: subject, onExtra: onExtra}
	r.mu.Lock()
	r.next++
	token := strconv.FormatUint(r.next, 36)
	r.waiting[token] = w
	r.mu.Unlock()
	return r.prefix + token, w
}

// caughtUp returns once every reply the client has read off the socket so far
// is filed (or the filing stopped).
func (r *replies) caughtUp() {
	delivered, err := r.sub.Delivered()
	if err != nil {
		return // unsubscribed: the connection closed
	}
	r.mu.Lock()
	for r.filed < delivered && !r.stopped {
		r.moved.Wait()
	}
	r.mu.Unlock()
}

// done forgets the request whose reply subject is reply: at once, or, when
// it was answered and someone listens for extra replies, ExtraReplyWindow
// later.
func (r *replies) done(reply string, w *waiter, answered bool) {
	token := strings.TrimPrefix(reply, r.prefix)
	forget := func() {
		r.mu.Lock()
		delete(r.waiting, token)
		r.mu.Unlock()
	}
	if !answered || w.onExtra == nil {
		forget()
		return
	}
	time.AfterFunc(ExtraReplyWindow, forget)
}
