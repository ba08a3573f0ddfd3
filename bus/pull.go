package bus

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
// rather than with jetstream.Consumer.Fetch. Fetch gives a pull up on the
// client's clock, at most a second after the server's expiry (half a second
// for a 5 s pull), and drops whatever reaches it later. But JetStream may hand
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
// expiry), which travels behind every call it delivered into the pull. The
// worker gives a pull up on its own only a whole PullWait after JetStream
// should have ended it, when the request or its end has most likely been lost
// (a reconnection, a restarted server), or when the pull falls silent: each
// pull asks for an idle heartbeat every fifth of its expiry, and one that
// hears nothing, neither call nor heartbeat, until its expiry at first, then
// for three heartbeats, has lost the consumer's leader (a crashed node of a
// cluster; without heartbeats the worker would learn of it only a PullWait
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
	// errPullGivenUp: JetStream did not end it within a PullWait of its expiry.
	errPullGivenUp = errors.New("bus: JetStream did not end a pull; it was given up")
	// errPullLost: the connection it was sent on was lost (reconnected or
	// closed); a restarted server has forgotten it.
	errPullLost = errors.New("bus: the connection a pull was sent on was lost")
	// errPullSilent: neither call nor heartbeat came until its expiry, or for
	// three heartbeats after the last word.
	errPullSilent = errors.New("bus: a pull heard no heartbeat; it was given up")
)

// Heartbeats of a pull: asked for every expiry/heartbeatsPerPull (JetStream
// refuses a heartbeat over half the expiry), the pull given up after
// silentBeats of them without a word.
const (
	heartbeatsPerPull = 5
	silentBeats       = 3
)

// statusRoom is room, in a pull's channel, for the status messages beside its
// calls: its heartbeats (at most one each heartbeat of its expiry), the one
// that ends the pull, and room to spare.
const statusRoom = heartbeatsPerPull + 3

// pullRequest is the body of a request for calls on the consumer's
// CONSUMER.MSG.NEXT subject: how many, and for how long JetStream keeps the
// request open waiting for them (in nanoseconds).
type pullRequest struct {
	Batch     int           `json:"batch"`
	Expires   time.Duration `json:"expires"`
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
}

// puller sends pull requests for one consumer.
type puller struct {
	nc      *nats.Conn
	subject string        // the consumer's CONSUMER.MSG.NEXT subject
	expires time.Duration // how long JetStream keeps a pull open
}

func newPuller(js jetstream.JetStream, stream, consumer string, expires time.Duration) *puller {
	return &puller{
		nc:      js.Conn(),
		subject: apiPrefix(js) + "CONSUMER.MSG.NEXT." + stream + "." + consumer,
		expires: expires,
	}
}

// start asks for n calls on an inbox of the new pull's own; the pull ends, as
// lost, when lost is closed. It fails only when the request cannot be sent
// (the connection is closed, say); JetStream's refusals end the pull instead
// (see pull.next).
func (p *puller) start(n int, lost <-chan struct{}) (*pull, error) {
	heartbeat := p.expires / heartbeatsPerPull
	body, err := json.Marshal(pullRequest{Batch: n, Expires: p.expires, Heartbeat: heartbeat})
	if err != nil {
		return nil, fmt.Errorf("bus: pull request: %w", err)
	}
	inbox := p.nc.NewInbox()
	pl := &pull{nc: p.nc, n: n, msgs: make(chan *nats.Msg, n+statusRoom), lost: lost}
	if pl.sub, err = p.nc.ChanSubscribe(inbox, pl.msgs); err != nil {
		return nil, fmt.Errorf("bus: pull: %w", err)
	}
	if err := p.nc.PublishRequest(p.subject, inbox, body); err != nil {
		_ = pl.sub.Unsubscribe()
		return nil, fmt.Errorf("bus: pull: %w", err)
	}
	pl.giveUp = time.NewTimer(2 * p.expires)
	// The first word may take a round trip and a heartbeat: it is waited for
	// until the pull's expiry; later ones for silentBeats heartbeats.
	pl.silence, pl.silentAfter = time.NewTimer(p.expires), silentBeats*heartbeat
	return pl, nil
}

// pull is one pull request and the inbox JetStream answers it on.
type pull struct {
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

// next returns the pull's next call, or nil once the pull has ended, with the
// reason: nil when every call asked for came or the pull expired, or when ctx
// ended (the worker is stopping); an error matching jetstream.ErrConsumerDeleted
// or nats.ErrNoResponders when the consumer is gone; errPullGivenUp when
// JetStream never ended it; errPullSilent when it fell silent; errPullLost
// when its connection was lost; another error for another refusal. Calls
// already received when the pull ends are still returned.
func (pl *pull) next(ctx context.Context) (jetstream.Msg, error) {
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
			return &pulledMsg{msg: m, nc: pl.nc}, nil
		case <-pl.giveUp.C:
			pl.end(errPullGivenUp)
		case <-pl.silence.C:
			if len(pl.msgs) > 0 { // not silent: this reader was slow
				pl.silence.Reset(pl.silentAfter)
				continue
			}
			pl.end(errPullSilent)
		case <-pl.lost:
			pl.end(errPullLost)
		case <-ctx.Done():
			pl.end(nil)
		}
	}
	// Calls that came before the end and have not been read yet.
	for {
		select {
		case m := <-pl.msgs:
			if _, _, ok := pullStatus(m); !ok {
				return &pulledMsg{msg: m, nc: pl.nc}, nil
			}
		default:
			return nil, pl.err
		}
	}
}

// end stops listening to the pull's inbox.
func (pl *pull) end(err error) {
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
		return fmt.Errorf("bus: pull: %w", nats.ErrNoResponders)
	case statusConflict:
		switch d := strings.ToLower(descr); {
		case strings.Contains(d, "consumer deleted"):
			return fmt.Errorf("bus: pull: %w", jetstream.ErrConsumerDeleted)
		case strings.Contains(d, "leadership change"):
			return fmt.Errorf("bus: pull: %w", jetstream.ErrConsumerLeadershipChanged)
		}
	}
	return fmt.Errorf("bus: pull refused: %s %s", code, descr)
}
