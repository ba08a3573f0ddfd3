package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/dispatch"
)

// msgDelivery is the dispatch.Delivery of a call's message: the settler's
// decisions carried out on JetStream.
type msgDelivery struct{ m jetstream.Msg }

var _ dispatch.Delivery = msgDelivery{}

// Ack acknowledges the message without waiting for JetStream's reply.
func (d msgDelivery) Ack() error { return d.m.Ack() }

// ConfirmAck acknowledges the message and waits for JetStream's reply (a
// double ack). A message acknowledged before is no error; a closed connection
// is dispatch.ErrPermanent.
func (d msgDelivery) ConfirmAck(ctx context.Context) error {
	err := d.m.DoubleAck(ctx)
	switch {
	case errors.Is(err, jetstream.ErrMsgAlreadyAckd):
		return nil
	case errors.Is(err, nats.ErrConnectionClosed):
		return fmt.Errorf("%w: %w", dispatch.ErrPermanent, err)
	}
	return err
}

// Terminate terminates the message, with reason: JetStream never delivers it
// again.
func (d msgDelivery) Terminate(reason string) error { return d.m.TermWithReason(reason) }

// HandBack negatively acknowledges the message, to be redelivered after
// delay.
func (d msgDelivery) HandBack(delay time.Duration) error {
	if delay <= 0 {
		return d.m.Nak()
	}
	return d.m.NakWithDelay(delay)
}
