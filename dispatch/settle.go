package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/backoff"
)

// Runner runs one call to its answer. [*Dispatcher] is one; an adapter may
// wrap it, to give the call's body a way to its caller (tool.WithCaller).
type Runner interface {
	// Run returns exactly one answer per call, or an error matching
	// ErrHandBack when ctx ended before the call was answered and nothing
	// irreversible happened. See [Dispatcher.Run].
	Run(ctx context.Context, c events.Call) (Result, error)
}

var _ Runner = (*Dispatcher)(nil)

// Delivery is one delivery of a call by the queue that carries calls, as the
// adapter that took it from the queue hands it to a [Settler]: the ways to
// settle it. The Settler calls one of them, or ConfirmAck more than once.
type Delivery interface {
	// Ack acknowledges the delivery without waiting for the queue to confirm
	// it.
	Ack() error
	// ConfirmAck acknowledges the delivery and waits until the queue confirms
	// it or ctx ends. An acknowledgement confirmed before is no error. It
	// returns an error matching ErrPermanent when trying again cannot help.
	ConfirmAck(ctx context.Context) error
	// Terminate ends the delivery for good, for reason: the call is never
	// delivered again.
	Terminate(reason string) error
	// HandBack returns the delivery to the queue, to be delivered again after
	// delay (at once when delay is 0).
	HandBack(delay time.Duration) error
}

// Answers is where the answers to calls are stored, for their callers to
// read.
type Answers interface {
	// Publish stores a, trying again after transient failures until ctx ends;
	// two copies of one answer are stored once. It returns an error matching
	// ErrPermanent when trying again cannot help, and one wrapping ctx's
	// error when ctx ended first.
	Publish(ctx context.Context, a events.Answer) error
	// Answered reports whether an answer to the call that tenant, tool and
	// callID name, whatever its run, is stored. Each of the three is a valid
	// token (events.ValidToken). It returns an error when it cannot tell.
	Answered(ctx context.Context, tenant, tool, callID string) (bool, error)
}

// Settlement is how a [Settler] settled a delivery, for the adapter's
// counters.
type Settlement int

const (
	// Answered: the call's answer is stored, and the delivery was
	// acknowledged, or terminated if the answer is a rejection.
	Answered Settlement = iota + 1
	// AnsweredBefore: an answer to the call was stored before; the delivery
	// was acknowledged without running the call.
	AnsweredBefore
	// HandedBack: no answer was stored; the delivery was handed back, to be
	// run again.
	HandedBack
	// Unpublishable: the answer cannot be stored, and trying again cannot
	// help; the delivery was terminated.
	Unpublishable
)

// Timing of a confirmed acknowledgement.
const (
	// confirmAttempts bounds the tries of a confirmed acknowledgement.
	confirmAttempts = 3
	// confirmTimeout bounds the wait for the queue's confirmation of one try.
	confirmTimeout = 5 * time.Second
)

// confirmBackoff paces the tries of a confirmed acknowledgement: 50ms,
// doubling, at most a second.
var confirmBackoff = backoff.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}

// Settler takes each delivery of a call to its end: it runs the call unless
// its answer is stored already, stores the answer, and acknowledges,
// terminates or hands back the delivery. Its rules:
//
//   - A call delivered again, or marked as a repeat (events.Call.Repeat),
//     whose answer is stored is acknowledged without running: an earlier
//     delivery's acknowledgement was lost or late, or an earlier publication
//     of the call was answered. Running it again could contradict that
//     answer: one saying nothing ran, given while the store was away, is in
//     no record. When the look-up fails, the call runs as any other.
//   - A delivery is acknowledged only once its answer is stored; a
//     rejection's is then terminated instead: it would be rejected again.
//   - An indeterminate answer whose body was not entered is acknowledged with
//     confirmation, tried again when the confirmation does not come: no
//     record holds its key, so a redelivery that missed the stored answer
//     would run the call and contradict the answer given.
//   - Any other answer is acknowledged without confirmation: a lost
//     acknowledgement only means a redelivery, which the record or the stored
//     answer answers.
//   - An answer that can never be stored (ErrPermanent) terminates the
//     delivery; the record, where there is one, answers a call published
//     again.
//   - A run that ended without an answer (ErrHandBack; after a second for
//     any other error), and an answer not stored before ctx ended, hand the
//     delivery back.
//
// A Settler is safe for concurrent use.
type Settler struct {
	run     Runner
	answers Answers
	log     *slog.Logger
}

// NewSettler returns a settler that runs calls with run and stores their
// answers in answers; neither may be nil. It logs to log (default
// slog.Default()) one line per notable event, never arguments or outcomes:
// each answer stored at debug level, indeterminate ones at info.
func NewSettler(run Runner, answers Answers, log *slog.Logger) *Settler {
	if log == nil {
		log = slog.Default()
	}
	return &Settler{run: run, answers: answers, log: log}
}

// Settle runs c, delivered by del, and settles del; it returns how.
// c.Delivery counts the deliveries of c (0 or 1 for the first).
func (s *Settler) Settle(ctx context.Context, c events.Call, del Delivery) Settlement {
	if (c.Delivery > 1 || c.Repeat) && s.answeredBefore(ctx, c) {
		lctx := logContext(ctx, c.TraceParent)
		s.log.InfoContext(lctx, "a call delivered or sent again was answered before; acknowledged without running it",
			"tenant", c.Tenant, "tool", c.Tool, "call_id", c.CallID, "delivery", c.Delivery, "repeat", c.Repeat)
		if err := del.Ack(); err != nil {
			s.log.Warn("acknowledging an answered call failed", "call_id", c.CallID, "error", err)
		}
		return AnsweredBefore
	}
	res, err := s.run.Run(ctx, c)
	// The lines logged from here on name the call's span, as the dispatcher's
	// do, and so do the adapter's, which are given lctx.
	lctx := logContext(ctx, c.TraceParent)
	if res.Span.IsValid() {
		lctx = trace.ContextWithSpanContext(ctx, res.Span)
	}
	if err != nil {
		if !errors.Is(err, ErrHandBack) {
			s.log.ErrorContext(lctx, "dispatch failed without an answer", "tenant", c.Tenant, "tool", c.Tool,
				"call_id", c.CallID, "error", err)
			return s.handBack(lctx, del, time.Second, "the dispatch failed without an answer")
		}
		return s.handBack(lctx, del, 0, "the dispatch ended before an answer")
	}
	return s.answer(lctx, del, res.Answer)
}

// Answer stores a, an answer made without running a call (an adapter's
// rejection of a message it cannot read as one), and settles del as Settle
// settles an answered call; it returns how.
func (s *Settler) Answer(ctx context.Context, a events.Answer, del Delivery) Settlement {
	return s.answer(logContext(ctx, a.TraceParent), del, a)
}

// answeredBefore reports whether an answer to c is stored. When it cannot
// tell (a malformed token, which no answer is stored under, or a look-up that
// fails) it says no, and the call runs as any other.
func (s *Settler) answeredBefore(ctx context.Context, c events.Call) bool {
	for _, v := range []string{c.Tenant, c.Tool, c.CallID} {
		if !events.ValidToken(v) {
			return false
		}
	}
	ok, err := s.answers.Answered(ctx, c.Tenant, c.Tool, c.CallID)
	if err != nil {
		s.log.Warn("looking for an earlier answer failed", "call_id", c.CallID, "error", err)
		return false
	}
	return ok
}

// answer stores a and settles del: terminated for a rejection, acknowledged
// otherwise (with confirmation where the rules say so), terminated when a
// can never be stored, handed back when it was not stored before ctx ended.
func (s *Settler) answer(ctx context.Context, del Delivery, a events.Answer) Settlement {
	if err := s.answers.Publish(ctx, a); err != nil {
		if !errors.Is(err, ErrPermanent) {
			return s.handBack(ctx, del, 0, "the answer was not stored")
		}
		s.log.ErrorContext(ctx, "the answer cannot be published; terminating the call", "tenant", a.Tenant, "tool", a.Tool,
			"call_id", a.CallID, "kind", a.Kind, "error", err)
		if err := del.Terminate("answer cannot be published"); err != nil {
			s.log.WarnContext(ctx, "terminating a message failed", "error", err)
		}
		return Unpublishable
	}
	s.logAnswer(ctx, a)
	switch {
	case a.Kind == events.KindRejected:
		if err := del.Terminate("rejected: " + string(a.Code)); err != nil {
			s.log.WarnContext(ctx, "terminating a rejected call failed; it will be answered again from its redelivery",
				"call_id", a.CallID, "error", err)
		}
	case a.Kind == events.KindIndeterminate && !a.BodyEntered:
		s.confirmAck(ctx, del, a)
	default:
		if err := del.Ack(); err != nil {
			s.log.WarnContext(ctx, "acknowledging an answered call failed; it will be redelivered and answered from its record",
				"tenant", a.Tenant, "call_id", a.CallID, "error", err)
		}
	}
	return Answered
}

// confirmAck acknowledges del, answered by a, with confirmation, trying
// again up to confirmAttempts times while the confirmation does not come.
func (s *Settler) confirmAck(ctx context.Context, del Delivery, a events.Answer) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, confirmTimeout)
		err := del.ConfirmAck(actx)
		cancel()
		if err == nil {
			return
		}
		if attempt == confirmAttempts || ctx.Err() != nil || errors.Is(err, ErrPermanent) {
			s.log.WarnContext(ctx,
				"acknowledging an indeterminate call failed; a redelivery that misses its stored answer will run it again",
				"tenant", a.Tenant, "call_id", a.CallID, "attempts", attempt, "error", err)
			return
		}
		backoff.Sleep(ctx, confirmBackoff.Delay(attempt))
	}
}

// handBack hands del back, to be delivered again after delay, for why.
func (s *Settler) handBack(ctx context.Context, del Delivery, delay time.Duration, why string) Settlement {
	if err := del.HandBack(delay); err != nil {
		s.log.WarnContext(ctx, "handing a message back failed; it returns after the ack wait", "reason", why, "error", err)
	}
	return HandedBack
}

// logAnswer logs a stored answer: its addressing, kind, reason and key, never
// its arguments or outcome.
func (s *Settler) logAnswer(ctx context.Context, a events.Answer) {
	level, msg := slog.LevelDebug, "call answered"
	if a.Kind == events.KindIndeterminate {
		level, msg = slog.LevelInfo, "call indeterminate: its key waits for an operator's resolution"
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("tenant", a.Tenant), slog.String("tool", a.Tool), slog.String("run_id", a.RunID),
		slog.String("call_id", a.CallID), slog.String("kind", string(a.Kind))}
	if a.Reason != "" {
		attrs = append(attrs, slog.String("reason", string(a.Reason)), slog.Bool("body_entered", a.BodyEntered))
	}
	if a.Code != "" {
		attrs = append(attrs, slog.String("code", string(a.Code)))
	}
	if a.Key != "" {
		attrs = append(attrs, slog.String("key", a.Key))
	}
	s.log.LogAttrs(ctx, level, msg, attrs...)
}
