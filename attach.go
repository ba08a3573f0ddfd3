package toolexec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/internal/connloss"
)

// Attach waits for the answer to a call published earlier, by this client or
// another (after a restart, or an *events.NoAnswerError): from the events
// stream if it is stored, else the moment it is. Its answer and errors are
// Call's, and an error matching events.ErrInvalidToken for a malformed token,
// ErrNoHistoryService when the client's account has no JetStream and no
// executor answers the tenant's history requests, or a *bus.HistoryError
// from the history service.
//
// It subscribes to the call's answer subject first, then looks for the stored
// answer once, and returns whichever comes first. A client whose NATS account
// has JetStream gets the stored answer with one message get, making no
// consumer: attaches leave nothing behind on the server, however many there
// are. A tenant in an account of its own, which imports its subjects from the
// executors' account and no JetStream API, asks the executors' history
// service (toolexec.history.<tenant>) instead: the client turns to it by
// itself the first time JetStream answers that the account has none (see
// HistoryPath). The operators' account, which imports no tenant's history
// subject, is answered on toolexec.admin.history when nothing answers the
// tenant's.
func (c *Client) Attach(ctx context.Context, tenant, tool, runID, callID string) (*events.Answer, error) {
	a, err := c.attach(ctx, tenant, tool, runID, callID)
	if err != nil {
		return nil, c.callError(ctx, events.Call{Tenant: tenant, Tool: tool, RunID: runID, CallID: callID}, err)
	}
	return &a, a.Err()
}

// attach waits for the answer to the call that tenant, tool, runID and callID
// name; see Attach.
func (c *Client) attach(ctx context.Context, tenant, tool, runID, callID string) (events.Answer, error) {
	for _, f := range []struct{ name, v string }{{"tenant", tenant}, {"tool", tool}, {"runid", runID}, {"callid", callID}} {
		if err := events.CheckToken(f.name, f.v); err != nil {
			return events.Answer{}, err
		}
	}
	filter := wire.AnswerFilter(tenant, tool, runID, callID)
	if !c.viaService() {
		a, err := c.attachBy(ctx, filter, callID, c.lookStored(filter))
		if err == nil || !c.fallBack(err) {
			return a, err
		}
	}
	return c.attachService(ctx, tenant, filter, callID)
}

// Find looks once for the stored answer to tenant's call callID, whatever its
// tool and run (the first stored, should the id have been used for two tools),
// without waiting. It returns nil and a nil error when no answer is stored
// yet; an answer found comes with the error [events.Answer.Err] gives, as
// Attach's does. It reads as Attach does (see HistoryPath). Errors otherwise:
// one matching events.ErrInvalidToken for a malformed token, ErrBadAnswer, a
// JetStream error, ErrNoHistoryService or a *bus.HistoryError.
func (c *Client) Find(ctx context.Context, tenant, callID string) (*events.Answer, error) {
	for _, f := range []struct{ name, v string }{{"tenant", tenant}, {"callid", callID}} {
		if err := events.CheckToken(f.name, f.v); err != nil {
			return nil, err
		}
	}
	a, found, err := c.findStored(ctx, tenant, wire.EventSubject(tenant, "*", "*", "*", callID))
	if err != nil || !found {
		return nil, err
	}
	return &a, a.Err()
}

// findStored looks once for the first event of tenant stored under filter,
// without waiting; see Find.
func (c *Client) findStored(ctx context.Context, tenant, filter string) (a events.Answer, found bool, err error) {
	if !c.viaService() {
		lctx, cancel := context.WithTimeout(ctx, lookTimeout)
		a, found, err := c.lookStored(filter)(lctx)
		cancel()
		if err == nil || !c.fallBack(err) {
			return a, found, err
		}
	}
	return c.storedAnswer(ctx, tenant, filter)
}

// lookStored returns the look of an attach through JetStream: the first event
// stored under filter, by one message get.
func (c *Client) lookStored(filter string) lookFunc {
	return func(ctx context.Context) (events.Answer, bool, error) {
		m, err := c.stored.First(ctx, filter)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return events.Answer{}, false, nil
		case err != nil:
			return events.Answer{}, false, fmt.Errorf("toolexec: reading %s: %w", filter, err)
		}
		a, err := decodeAnswer(m.Header, m.Data)
		return a, true, err
	}
}

// lookFunc looks once for the answer stored under one call's answer subject:
// found is false, with a nil error, when none is stored yet.
type lookFunc func(ctx context.Context) (a events.Answer, found bool, err error)

// attachBy subscribes to filter, then looks for the stored answer with look,
// and returns whichever comes first. When nothing is stored yet (or the look
// went unanswered), the answer is heard live from then on; but one published
// just before the subscription took effect was not heard, and may not have
// been stored yet when looked for (the server stores a message after handing
// it to subscribers): it looks again, less and less often, until one of the
// two finds it. A look that fails otherwise ends the attach with its error,
// unless the answer was heard meanwhile.
func (c *Client) attachBy(ctx context.Context, filter, callID string, look lookFunc) (events.Answer, error) {
	ch := make(chan *nats.Msg, 4)
	sub, err := c.nc.ChanSubscribe(filter, ch)
	if err != nil {
		return events.Answer{}, fmt.Errorf("toolexec: subscribing to %s: %w", filter, err)
	}
	defer sub.Unsubscribe()
	lctx, cancel := context.WithTimeout(ctx, lookTimeout)
	a, found, err := look(lctx)
	cancel()
	switch {
	case found:
		return a, err
	case err == nil, errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		stored := make(chan lookupResult, 1)
		go lookAgain(actx, look, stored)
		return c.await(ctx, callID, ch, stored, nil, nil) // lookAgain keeps looking
	}
	select {
	case m := <-ch: // heard live while the look failed
		return decodeAnswer(m.Header, m.Data)
	default:
	}
	if cerr := contextEnded(ctx); cerr != nil {
		return events.Answer{}, fmt.Errorf("toolexec: waiting for the answer to call %s: %w", callID, cerr)
	}
	return events.Answer{}, err
}

// Looking for a stored answer: each look is bounded by lookTimeout (a request
// the server dropped under load must not hold an attach until its context
// ends), and looks again after lookFirstPause, doubling up to lookMaxPause.
const (
	lookTimeout    = 5 * time.Second
	lookFirstPause = 100 * time.Millisecond
	lookMaxPause   = 5 * time.Second
)

type lookupResult struct {
	a   events.Answer
	err error
}

// lookAgain looks until look finds the answer, which it sends to out, or ctx
// ends. Looks that fail are tried again.
func lookAgain(ctx context.Context, look lookFunc, out chan<- lookupResult) {
	pauses := backoff.Backoff{Initial: lookFirstPause, Max: lookMaxPause}
	for n := 1; ; n++ {
		if !backoff.Sleep(ctx, pauses.Delay(n)) {
			return
		}
		lctx, cancel := context.WithTimeout(ctx, lookTimeout)
		a, found, err := look(lctx)
		cancel()
		if found {
			out <- lookupResult{a, err}
			return
		}
	}
}

// pendingGrace is how long Call looks for the stored answer of a call that
// the stream refused as waiting, before it takes the call for one that waits
// indeed: a call leaves the stream when acknowledged, a moment after its
// answer is published, and the answer is stored a moment after a subscriber
// heard it.
const pendingGrace = 500 * time.Millisecond

// answeredJustNow looks for the answer stored under filter, a few times within
// pendingGrace.
func (c *Client) answeredJustNow(ctx context.Context, tenant, filter string) (events.Answer, bool) {
	gctx, cancel := context.WithTimeout(ctx, pendingGrace)
	defer cancel()
	pauses := backoff.Backoff{Initial: 25 * time.Millisecond, Max: pendingGrace}
	for n := 1; ; n++ {
		if a, found, err := c.findStored(gctx, tenant, filter); err == nil && found {
			return a, true
		}
		if !backoff.Sleep(gctx, pauses.Delay(n)) {
			return events.Answer{}, false
		}
	}
}

// await returns the first answer from ch or from stored. When the
// connection's life ends (life), the answer may have been published while no
// subscription could hear it: unless a look in the stream is under way
// already, await starts one with lookup (it waits for the reconnection, as
// every request on the connection does). Without lookup, life is not watched.
func (c *Client) await(ctx context.Context, callID string, ch <-chan *nats.Msg, stored <-chan lookupResult,
	life context.Context, lookup func() <-chan lookupResult) (events.Answer, error) {
	var lost <-chan struct{}
	if lookup != nil {
		lost = life.Done()
	}
	for {
		select {
		case m := <-ch:
			return decodeAnswer(m.Header, m.Data)
		case r := <-stored:
			if ctx.Err() == nil {
				return r.a, r.err
			}
			stored = nil
		case <-lost:
			lost = connloss.Context(c.nc).Done() // the next life's
			if stored == nil {
				stored = lookup()
			}
		case <-ctx.Done():
			return events.Answer{}, fmt.Errorf("toolexec: waiting for the answer to call %s: %w", callID, ctx.Err())
		}
	}
}

// contextEnded returns ctx's error, or context.DeadlineExceeded once ctx's deadline
// has passed even if ctx has not noticed yet: nats.go refuses a request whose
// deadline is already behind it with an error of its own, which must not read as
// anything but a timeout.
func contextEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// decodeAnswer reads an answer (or a resolution) from the headers and payload of
// a message in either mode, as [wire.DecodeAnswer] does. Errors match
// ErrBadAnswer, and wrap the error of wire.DecodeAnswer that says what is wrong.
func decodeAnswer(h nats.Header, data []byte) (events.Answer, error) {
	a, err := wire.DecodeAnswer(h, data)
	if err != nil {
		return events.Answer{}, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return a, nil
}
