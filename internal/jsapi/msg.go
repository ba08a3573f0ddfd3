package jsapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Acknowledgement bodies, as JetStream reads them on a message's reply subject.
const (
	ackBody        = "+ACK"
	nakBody        = "-NAK"
	inProgressBody = "+WPI"
	termBody       = "+TERM"
)

// msg is a message delivered into a Pull, seen as a jetstream.Msg. Its
// acknowledgements are published to its reply subject on the pull's
// connection, whose inbox subscriptions do not matter to them;
// after an acknowledgement (ack, nak or term) has been sent, every other one
// returns jetstream.ErrMsgAlreadyAckd, as jetstream's own messages do.
type msg struct {
	msg *nats.Msg
	nc  *nats.Conn

	mu    sync.Mutex // protects acked
	acked bool
}

var _ jetstream.Msg = (*msg)(nil)

// Metadata returns the delivery's metadata, read from its reply subject.
func (m *msg) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := m.msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("jsapi: metadata: %w", err)
	}
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Consumer: md.Sequence.Consumer, Stream: md.Sequence.Stream},
		NumDelivered: md.NumDelivered,
		NumPending:   md.NumPending,
		Timestamp:    md.Timestamp,
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Domain:       md.Domain,
	}, nil
}

// Data returns the message's payload.
func (m *msg) Data() []byte { return m.msg.Data }

// Headers returns the message's headers.
func (m *msg) Headers() nats.Header { return m.msg.Header }

// Subject returns the subject the call was published to.
func (m *msg) Subject() string { return m.msg.Subject }

// Reply returns the subject acknowledgements go to.
func (m *msg) Reply() string { return m.msg.Reply }

// Ack acknowledges the call without waiting for the server.
func (m *msg) Ack() error { return m.settle(context.Background(), ackBody, false) }

// DoubleAck acknowledges the call and waits, within ctx, for the server to
// confirm it.
func (m *msg) DoubleAck(ctx context.Context) error { return m.settle(ctx, ackBody, true) }

// Nak hands the call back for redelivery at once.
func (m *msg) Nak() error { return m.settle(context.Background(), nakBody, false) }

// NakWithDelay hands the call back for redelivery after delay.
func (m *msg) NakWithDelay(delay time.Duration) error {
	if delay <= 0 {
		return m.Nak()
	}
	return m.settle(context.Background(), fmt.Sprintf(`%s {"delay": %d}`, nakBody, delay.Nanoseconds()), false)
}

// InProgress tells the server the call is still being worked on, which
// restarts its ack wait. It may be sent any number of times before an
// acknowledgement.
func (m *msg) InProgress() error {
	if m.settled() {
		return jetstream.ErrMsgAlreadyAckd
	}
	return m.send(context.Background(), inProgressBody, false)
}

// Term tells the server never to deliver the call again.
func (m *msg) Term() error { return m.settle(context.Background(), termBody, false) }

// TermWithReason is Term with a reason the server puts in its advisory.
func (m *msg) TermWithReason(reason string) error {
	return m.settle(context.Background(), termBody+" "+reason, false)
}

// settle sends the acknowledgement body (confirmed when confirm is set) unless
// one was sent before, and remembers that it was.
func (m *msg) settle(ctx context.Context, body string, confirm bool) error {
	if m.settled() {
		return jetstream.ErrMsgAlreadyAckd
	}
	if err := m.send(ctx, body, confirm); err != nil {
		return err
	}
	m.mu.Lock()
	m.acked = true
	m.mu.Unlock()
	return nil
}

func (m *msg) settled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acked
}

// send publishes body to the call's reply subject; with confirm, it waits for
// the server's reply within ctx.
func (m *msg) send(ctx context.Context, body string, confirm bool) error {
	if m.msg.Reply == "" {
		return jetstream.ErrMsgNoReply
	}
	if confirm {
		if _, err := m.nc.RequestWithContext(ctx, m.msg.Reply, []byte(body)); err != nil {
			return fmt.Errorf("jsapi: acknowledging: %w", err)
		}
		return nil
	}
	if err := m.nc.Publish(m.msg.Reply, []byte(body)); err != nil {
		return fmt.Errorf("jsapi: acknowledging: %w", err)
	}
	return nil
}
