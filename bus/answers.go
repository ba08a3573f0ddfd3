package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/internal/connloss"
	"github.com/tesserix/toolexec/internal/eventlog"
	"github.com/tesserix/toolexec/internal/retry"
)

// publishAttemptTimeout bounds the wait for the PubAck of one try of an
// answer's publication.
const publishAttemptTimeout = 5 * time.Second

// answerStream is a worker's dispatch.Answers: it publishes answers to
// TOOLEXEC_EVENTS and looks for those stored before.
type answerStream struct {
	js      jetstream.JetStream
	stored  *eventlog.Log // TOOLEXEC_EVENTS, read by subject
	source  string        // the answers' CloudEvents source
	mode    wire.Mode
	log     *slog.Logger
	retried func() // called each time a publication is tried again
}

var _ dispatch.Answers = (*answerStream)(nil)

// Publish stores a in TOOLEXEC_EVENTS and waits for the PubAck, retrying
// transient failures with backoff until ctx ends. A try stops waiting when its
// connection is lost, since its PubAck would be routed to the lost connection,
// and is made again on the next one (the answer's message id makes a second
// copy a duplicate). It returns an error matching dispatch.ErrPermanent for an
// answer that cannot be encoded or that the connection refuses for good (too
// large, closed), and one wrapping ctx's error when ctx ended first.
func (s *answerStream) Publish(ctx context.Context, a events.Answer) error {
	a.Error = capError(a.Error)
	// The message carries the answer's message id, which makes a second copy
	// a duplicate, and expects the events stream.
	msg, err := wire.AnswerMsg(a, s.source, s.mode)
	if err != nil {
		return fmt.Errorf("%w: %w", dispatch.ErrPermanent, err)
	}
	for attempt := 1; ; attempt++ {
		pctx, cancel := connloss.Attempt(ctx, s.js.Conn(), publishAttemptTimeout)
		ack, err := s.js.PublishMsg(pctx, msg)
		cancel()
		if err == nil {
			if ack.Duplicate {
				s.log.DebugContext(ctx, "answer already stored", "tenant", a.Tenant, "call_id", a.CallID, "kind", a.Kind)
			}
			return nil
		}
		if retry.Permanent(err) {
			return fmt.Errorf("%w: %w", dispatch.ErrPermanent, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bus: publishing answer: %w", ctx.Err())
		}
		s.retried()
		s.log.WarnContext(ctx, "publishing an answer failed; retrying", "tenant", a.Tenant, "call_id", a.CallID,
			"attempt", attempt, "error", err)
		if !backoff.Sleep(ctx, retryBackoff.Delay(attempt)) {
			return fmt.Errorf("bus: publishing answer: %w", ctx.Err())
		}
	}
}

// Answered reports whether an answer to the call named by tenant, tool and
// callID is stored in TOOLEXEC_EVENTS, whatever its run: one message get, by
// the answer subject. It returns JetStream's error when it cannot tell.
func (s *answerStream) Answered(ctx context.Context, tenant, tool, callID string) (bool, error) {
	_, err := s.stored.First(ctx, wire.AnswerFilter(tenant, tool, "*", callID))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	}
	return false, err
}

// MaxErrorBytes bounds the error text of a published answer. A longer one (a
// tool's error quoting a whole response, an SDK message quoting a hostile
// attribute) is cut, on a character boundary, and marked as cut, so that the
// answer still fits in a message.
const MaxErrorBytes = 8 << 10

const cutMark = " [truncated]"

// capError returns s cut to MaxErrorBytes.
func capError(s string) string {
	if len(s) <= MaxErrorBytes {
		return s
	}
	n := MaxErrorBytes - len(cutMark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + cutMark
}
