// Package jsapi makes the JetStream API requests that nats.go's jetstream
// package does not make the way toolexec needs them, and names their
// subjects ([APIPrefix]).
//
// A [Puller] asks a JetStream pull consumer for messages with pull
// requests of its own, each on an inbox of its own, listened to until
// JetStream ends it, instead of through nats.go's jetstream.Consumer. Fetch
// gives a pull up on the client's clock and drops what arrives later; Consume
// and Messages, after a reconnection, pull again on the same inbox while the
// server may still hold the previous pull, and so hold more messages than
// asked for (docs/notes-jetstream-pull.md, bus/pullfit_test.go). A toolexec
// worker asks only for as many calls as it can start at once, so it needs
// neither.
package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A worker asks the shared consumer for calls with pull requests of its own
// rather than with jetstream.Consumer.Fetch (or Consume and Messages; see the
// package's doc). Fetch gives a pull up on the client's clock, at most a
// second after the server's expiry (half a second for a 5 s pull), and drops
// whatever reaches it later. But JetStream may hand
// a call to a pull until the pull expires by the server's clock, and the call
// then still has to travel: behind the server's other work (storing a burst of
// calls) and the network. A call that arrives after the client gave up is
// dropped unseen, waits out its ack wait (30 s by default), and comes back
// counted as redelivered; if the client's unsubscription reaches the server
// first, the server puts the call back at once but counts the failed delivery
// as a redelivery all the same. Either way the redelivery counters count
// deliveries no worker ever saw.
//
// A pull here listens on its inbox until JetStream ends it: it has delivered
// every call asked for, or it sends the status that closes the pull (408 on
// expiry), which travels behind every call it delivered into the pull. A pull
// is given up on the client's side only a whole expiry after JetStream should
// have ended it (the worker's PullWait), when the request or its end has most likely been lost
// (a reconnection, a restarted server), or when the pull falls silent: each
// pull asks for an idle heartbeat every fifth of its expiry, and one that
// hears nothing, neither call nor heartbeat, until its expiry at first, then
// for three heartbeats, has lost the consumer's leader (a crashed node of a
// cluster; without heartbeats the worker would learn of it only an expiry
// after the expiry, 10 s from the pull's start by default).

// Pull request statuses (the Status header of a message without data).
const (
	statusHeader      = "Status"
	descriptionHeader = "Description"
	statusHeartbeat   = "100" // idle heartbeat or flow control; never asked for here
	statusNoMessages  = "404"
	statusTimeout     = "408"
	statusConflict    = "409"
	statusNoResponder = "503"
)

// Why a pull ended without JetStream ending it.
var (
	// ErrGivenUp is returned by Pull.Next when JetStream did not end the
	// pull within a second expiry after the first.
	ErrGivenUp = errors.New("jsapi: JetStream did not end a pull; it was given up")
	// ErrLost is returned by Pull.Next when the connection the pull was
	// sent on was lost (reconnected or closed); a restarted server has
	// forgotten it.
	ErrLost = errors.New("jsapi: the connection a pull was sent on was lost")
	// ErrSilent is returned by Pull.Next when neither message nor heartbeat
	// came until the pull's expiry, or for three heartbeats after the last
	// word.
	ErrSilent = errors.New("jsapi: a pull heard no heartbeat; it was given up")
)

// HeartbeatsPerPull is how many idle heartbeats a pull asks for over its
// expiry (JetStream refuses a heartbeat over half the expiry); a pull is
// given up after silentBeats of them without a word.
const HeartbeatsPerPull = 5

const silentBeats = 3

// statusRoom is room, in a pull's channel, for the status messages beside its
// calls: its heartbeats (at most one each heartbeat of its expiry), the one
// that ends the pull, and room to spare.
const statusRoom = HeartbeatsPerPull + 3

// pullRequest is the body of a request for calls on the consumer's
// CONSUMER.MSG.NEXT subject: how many, and for how long JetStream keeps the
// request open waiting for them (in nanoseconds).
type pullRequest struct {
	Batch     int           `json:"batch"`
	Expires   time.Duration `json:"expires"`
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
}

// Puller sends pull requests for one consumer.
type Puller struct {
	nc      *nats.Conn
	subject string        // the consumer's CONSUMER.MSG.NEXT subject
	expires time.Duration // how long JetStream keeps a pull open
}

// New returns a Puller that sends its pulls on nc to subject, the consumer's
// CONSUMER.MSG.NEXT subject under its JetStream API prefix, each kept open by
// JetStream for expires.
func New(nc *nats.Conn, subject string, expires time.Duration) *Puller {
	return &Puller{nc: nc, subject: subject, expires: expires}
}

// Start asks for n messages on an inbox of the new pull's own; the pull ends,
// as lost, when lost is closed. It fails only when the request cannot be sent
// (the connection is closed, say); JetStream's refusals end the pull instead
// (see Pull.Next).
func (p *Puller) Start(n int, lost <-chan struct{}) (*Pull, error) {
	heartbeat := p.expires / HeartbeatsPerPull
	body, err := json.Marshal(pullRequest{Batch: n, Expires: p.expires, Heartbeat: heartbeat})
	if err != nil {
		return nil, fmt.Errorf("jsapi: pull request: %w", err)
	}
	inbox := p.nc.NewInbox()
	pl := &Pull{nc: p.nc, n: n, msgs: make(chan *nats.Msg, n+statusRoom), lost: lost}
	if pl.sub, err = p.nc.ChanSubscribe(inbox, pl.msgs); err != nil {
		return nil, fmt.Errorf("jsapi: pull: %w", err)
	}
	if err := p.nc.PublishRequest(p.subject, inbox, body); err != nil {
		_ = pl.sub.Unsubscribe()
		return nil, fmt.Errorf("jsapi: pull: %w", err)
	}
	pl.giveUp = time.NewTimer(2 * p.expires)
	// The first word may take a round trip and a heartbeat: it is waited for
	// until the pull's expiry; later ones for silentBeats heartbeats.
	pl.silence, pl.silentAfter = time.NewTimer(p.expires), silentBeats*heartbeat
	return pl, nil
}

// Pull is one pull request and the inbox JetStream answers it on.
type Pull struct {
	nc     *nats.Conn
	n      int // calls asked for
	got    int // calls received
	sub    *nats.Subscription
	msgs   chan *nats.Msg // the inbox's messages, room for every one JetStream may send
	giveUp *time.Timer
	// silence fires when nothing has come for silentAfter (see
	// silentBeats); every message resets it.
	silence     *time.Timer
	silentAfter time.Duration
	lost        <-chan struct{} // closed when the connection the pull was sent on is lost
	ended       bool            // the inbox is no longer listened to
	err         error           // why the pull ended: nil when it was filled or expired
}

// Next returns the pull's next message, or nil once the pull has ended, with
// the reason: nil when every message asked for came or the pull expired, or
// when ctx ended (the caller is stopping); an error matching
// jetstream.ErrConsumerDeleted or nats.ErrNoResponders when the consumer is
// gone; ErrGivenUp when JetStream never ended it; ErrSilent when it fell
// silent; ErrLost when its connection was lost; another error for another
// refusal. Messages already received when the pull ends are still returned.
// A Pull is read by one goroutine.
func (pl *Pull) Next(ctx context.Context) (jetstream.Msg, error) {
	for !pl.ended {
		select {
		case m := <-pl.msgs:
			pl.silence.Reset(pl.silentAfter)
			if code, descr, ok := pullStatus(m); ok {
				if code != statusHeartbeat {
					pl.end(statusError(code, descr))
				}
				continue
			}
			if pl.got++; pl.got == pl.n {
				pl.end(nil)
			}
			return &msg{msg: m, nc: pl.nc}, nil
		case <-pl.giveUp.C:
			pl.end(ErrGivenUp)
		case <-pl.silence.C:
			if len(pl.msgs) > 0 { // not silent: this reader was slow
				pl.silence.Reset(pl.silentAfter)
				continue
			}
			pl.end(ErrSilent)
		case <-pl.lost:
			pl.end(ErrLost)
		case <-ctx.Done():
			pl.end(nil)
		}
	}
	// Calls that came before the end and have not been read yet.
	for {
		select {
		case m := <-pl.msgs:
			if _, _, ok := pullStatus(m); !ok {
				return &msg{msg: m, nc: pl.nc}, nil
			}
		default:
			return nil, pl.err
		}
	}
}

// end stops listening to the pull's inbox.
func (pl *Pull) end(err error) {
	pl.ended, pl.err = true, err
	pl.giveUp.Stop()
	pl.silence.Stop()
	_ = pl.sub.Unsubscribe()
}

// pullStatus returns the status of a message JetStream sent about a pull, and
// false for a call (a message with data, or without a status header).
func pullStatus(m *nats.Msg) (code, descr string, ok bool) {
	if len(m.Data) > 0 || len(m.Header) == 0 {
		return "", "", false
	}
	code = m.Header.Get(statusHeader)
	return code, m.Header.Get(descriptionHeader), code != ""
}

// statusError is the error a pull ends with for a status: nil for its expiry.
func statusError(code, descr string) error {
	switch code {
	case statusTimeout, statusNoMessages:
		return nil
	case statusNoResponder:
		return fmt.Errorf("jsapi: pull: %w", nats.ErrNoResponders)
	case statusConflict:
		switch d := strings.ToLower(descr); {
		case strings.Contains(d, "consumer deleted"):
			return fmt.Errorf("jsapi: pull: %w", jetstream.ErrConsumerDeleted)
		case strings.Contains(d, "leadership change"):
			return fmt.Errorf("jsapi: pull: %w", jetstream.ErrConsumerLeadershipChanged)
		}
	}
	return fmt.Errorf("jsapi: pull refused: %s %s", code, descr)
}
