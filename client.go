package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/internal/connloss"
	"github.com/tesserix/toolexec/internal/eventlog"
)

// Client publishes tool calls and reads their answers over NATS JetStream: it
// calls tools ([Client.Call], [Client.Publish]), finds the answers to calls
// made before ([Client.Attach], [Client.Find]), follows the answers and audit
// events ([Client.Watch]) or reads them page by page ([Client.History]),
// lists the tools the executors serve ([Client.Tools]) and hears what a
// call's body asks its caller ([Client.Interactions]). The admin requests
// have a client of their own ([AdminClient]). It is safe for concurrent use.
type Client struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	source  string
	mode    wire.Mode
	history HistoryPath
	runID   string
	// waitForPending is WithWaitForPending's: a call refused because a call
	// of the same tenant, tool and id waits in the stream is waited for.
	waitForPending bool
	sent           *sentIDs

	stored *eventlog.Log // TOOLEXEC_EVENTS, read by subject
	// noJetStream is set, with HistoryAuto, once the JetStream API said the
	// account has none: stored events are read through the history service.
	noJetStream atomic.Bool
	// reached holds the tenants of which this client has stored a call: a
	// stream took their calls once (see publish).
	reached sync.Map
}

// NewClient returns a client on nc. It returns an error matching
// ErrInvalidOption for a nil connection or an option it cannot use.
func NewClient(nc *nats.Conn, opts ...ClientOption) (*Client, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: a NATS connection is required", ErrInvalidOption)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("toolexec: %w", err)
	}
	return newClient(js, opts...)
}

// newClient returns a client that publishes and reads through js.
func newClient(js jetstream.JetStream, opts ...ClientOption) (*Client, error) {
	o := clientOptions{source: DefaultSource, log: slog.Default()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.runID == "" {
		o.runID = newID("run_")
	}
	c := &Client{
		nc: js.Conn(), js: js, log: o.log, source: o.source, mode: wire.Structured, history: o.history,
		runID: o.runID, waitForPending: o.waitForPending, sent: newSentIDs(sentWindow), stored: eventlog.New(js),
	}
	if o.binary {
		c.mode = wire.Binary
	}
	return c, nil
}

// RunID returns the run of the calls that name none.
func (c *Client) RunID() string { return c.runID }

// Call calls tool for tenant with args and waits for the answer.
//
// args is the JSON object of the tool's arguments: a json.RawMessage or []byte
// is sent as it is, nil as {}, anything else as encoding/json marshals it.
//
// Call subscribes to the call's answer subject before it publishes, so the
// answer cannot slip past. The answer it waits for is that of the call's
// tenant, tool and call id under any run: those three name a call, and a call
// published again under another run gets the answer of its first
// publication. A call that may repeat one published before (WithCallID) is
// also looked for among the stored answers, as Attach looks.
//
// Every answer is returned, with the error [events.Answer.Err] gives: nil
// when the tool ran (events.KindCompleted) or the answer is that of an
// earlier call with the same key (events.KindDeduplicated); otherwise, for
// errors.As, an *events.IndeterminateOutcomeError (the effect may or may not
// have landed; retrying will not run the tool again), an *events.FailedError
// or an *events.RejectedError. With no answer, the answer is nil and the
// error one of: an *events.RejectedError for a call refused before anything
// was sent (a bad token, arguments that are not a JSON object); an
// *events.CallIDTakenError (see WithCallID and WithWaitForPending); an
// *events.NoAnswerError when ctx ends first (the call may still be answered:
// Attach finds the answer); an error matching ErrOldCallStream,
// ErrBadAnswer, or jetstream.ErrNoStreamResponse when no stream takes the
// tenant's calls.
func (c *Client) Call(ctx context.Context, tenant, tool string, args any, opts ...CallOption) (*events.Answer, error) {
	call, err := c.newCall(tenant, tool, args, opts)
	if err != nil {
		return nil, err
	}
	a, err := c.call(ctx, call)
	if err != nil {
		return nil, c.callError(ctx, call, err)
	}
	return &a, a.Err()
}

// Receipt says where the calls stream stored a call that [Client.Publish]
// published. Its Tenant, Tool, RunID and CallID name the call:
// Attach(ctx, r.Tenant, r.Tool, r.RunID, r.CallID) waits for its answer.
type Receipt struct {
	Tenant, Tool, RunID, CallID string
	// Stream and Sequence are where the call is stored.
	Stream   string
	Sequence uint64
	// Duplicate says that the stream held the call already: a try sent again
	// after a lost acknowledgement found the first one stored, or the call
	// repeats one of this client's that still waits to be answered. Sequence
	// is then the first copy's, or 0 when the stream did not say it.
	Duplicate bool
}

// Publish stores a call of tool for tenant with args in the calls stream and
// returns its receipt, without waiting for the answer (Attach waits for it).
// args and opts are Call's.
//
// The stream keeps one call at most under a tenant, tool and call id, so a
// try whose acknowledgement does not come within 5 s, or whose connection is
// lost, is made again until ctx ends, marked as a repeat: if the first try was
// stored, the second is refused while it waits in the stream, and the receipt
// says Duplicate; if an executor has answered it meanwhile, the second is
// stored and the executor answers it from the stored answer without running
// it again. A try that no stream answered while the calls stream elects a
// leader is made again too: once this client has stored a call of the tenant,
// no responders means that election.
//
// Errors: an *events.RejectedError for a call refused before anything was
// sent; an *events.CallIDTakenError for a call id that a waiting call holds
// (see WithCallID); an error matching ErrOldCallStream; one matching
// jetstream.ErrNoStreamResponse when no stream takes the tenant's calls; or
// ctx's error wrapped, with the last refusal, when ctx ends first.
func (c *Client) Publish(ctx context.Context, tenant, tool string, args any, opts ...CallOption) (*Receipt, error) {
	call, err := c.newCall(tenant, tool, args, opts)
	if err != nil {
		return nil, err
	}
	msg, err := c.callMsg(call)
	if err != nil {
		return nil, c.publishError(call, err)
	}
	ack, err := c.publish(ctx, msg, call.Tenant, call.CallID)
	if errors.Is(err, errPending) {
		if err = c.judgePending(call); err == nil {
			ack = &jetstream.PubAck{Stream: wire.CallStream, Duplicate: true}
		}
	}
	if err != nil {
		return nil, c.publishError(call, err)
	}
	return &Receipt{Tenant: call.Tenant, Tool: call.Tool, RunID: call.RunID, CallID: call.CallID,
		Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// newCall returns the call of tool for tenant with args that opts describe,
// with a fresh call id unless they give one. An id chosen with WithCallID is
// counted as published (see judgePending).
func (c *Client) newCall(tenant, tool string, args any, opts []CallOption) (events.Call, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return events.Call{}, &events.RejectedError{Tool: tool, Code: events.CodeInvalidJSON, Field: "arguments", Message: err.Error(), Err: err}
	}
	s := callSettings{call: events.Call{Tenant: tenant, Tool: tool, RunID: c.runID, Source: c.source, Arguments: raw}}
	for _, opt := range opts {
		opt(&s)
	}
	switch {
	case s.call.CallID == "":
		s.call.CallID = NewCallID()
	case s.chosen:
		// A chosen id may have been published before: the executors then
		// answer from the stored answer, and so does Call.
		s.call.Repeat = true
		c.sent.add(sentKey(s.call), time.Now())
	}
	return s.call, nil
}

// callMsg checks call and encodes it in the client's mode; see wire.CallMsg.
func (c *Client) callMsg(call events.Call) (*nats.Msg, error) { return wire.CallMsg(call, c.mode) }

// errPending is publish's error for a first try that the stream refused
// because a call of the same tenant, tool and call id waits there: the call
// was not stored again. Whose that call is, this client's own or another
// publisher's of the same tenant, judgePending decides.
var errPending = errors.New("toolexec: a call with this tenant, tool and call id is stored and not yet answered")

// publish stores msg, the call of tenant with callID, in TOOLEXEC_CALLS_V2 and
// returns the PubAck; see Publish for the tries. A first try refused because
// the call's subject holds a call returns an error matching errPending.
func (c *Client) publish(ctx context.Context, msg *nats.Msg, tenant, callID string) (*jetstream.PubAck, error) {
	var refused error // the last try's error other than a context's
	for attempt := 1; ; attempt++ {
		if attempt == 2 {
			wire.MarkRepeat(msg)
		}
		pctx, cancel := connloss.Attempt(ctx, c.nc, callPublishAttempt)
		ack, err := c.js.PublishMsg(pctx, msg)
		lost := pctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			c.reached.Store(tenant, true)
			return ack, nil
		}
		switch stored := storeRefusal(err); {
		case stored == refusedPending && attempt > 1:
			// An earlier try, whose PubAck was lost, stored the call.
			c.reached.Store(tenant, true)
			return &jetstream.PubAck{Stream: wire.CallStream, Duplicate: true}, nil
		case stored == refusedPending:
			return nil, fmt.Errorf("%w: call %s of tenant %s (subject %s)", errPending, callID, tenant, msg.Subject)
		case stored == refusedOldStream:
			return nil, fmt.Errorf("%w: a stream other than %s (%s, of wire version 1, where the executors are older) took %s; "+
				"upgrade the executors before their callers (docs/PROTOCOL.md §11)", ErrOldCallStream, wire.CallStream, wire.LegacyCallStream,
				msg.Subject)
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			refused = err
		}
		_, reachedBefore := c.reached.Load(tenant)
		electing := reachedBefore && errors.Is(err, jetstream.ErrNoStreamResponse)
		if ctx.Err() == nil && (lost || electing) && backoff.Sleep(ctx, callPublishBackoff.Delay(attempt)) {
			continue
		}
		if ctxErr := ctx.Err(); ctxErr != nil && refused != nil {
			return nil, fmt.Errorf("toolexec: publishing call %s: %w (the last refusal: %w)", callID, ctxErr, refused)
		}
		return nil, fmt.Errorf("toolexec: publishing call %s: %w", callID, err)
	}
}

// Timing of a call's publication (see Client.publish): how long one try
// waits for its PubAck (a variable so that tests can shorten it), and the
// pauses between tries: 50ms, doubling, at most half a second.
var (
	callPublishAttempt = 5 * time.Second
	callPublishBackoff = backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
)

// A publication's refusal, as storeRefusal reads it.
const (
	refusedOther     = iota
	refusedPending   // a message is stored under the subject already
	refusedOldStream // the subject belongs to another stream than the one expected
)

// JetStream's error codes for the refusals storeRefusal tells apart.
const (
	errCodeStoreFailed    = 10077 // JSStreamStoreFailedF: "maximum messages per subject exceeded", among others
	errCodeStreamNotMatch = 10060 // JSStreamNotMatchErr: "expected stream does not match"
)

// storeRefusal reads why JetStream refused to store a call.
func storeRefusal(err error) int {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return refusedOther
	}
	switch {
	case api.ErrorCode == errCodeStoreFailed && strings.Contains(api.Description, "per subject"):
		return refusedPending
	case api.ErrorCode == errCodeStreamNotMatch:
		return refusedOldStream
	}
	return refusedOther
}

// sentWindow is how long the client remembers an id it chose and published,
// to tell its own earlier call, still waiting in the calls stream, from
// another publisher's (see judgePending).
const sentWindow = 2 * time.Minute

// judgePending judges a call the calls stream refused because a call of the
// same tenant, tool and call id waits there. That call counts as the
// caller's own, whose answer Call waits for (nil), when this client
// published the id at least twice within sentWindow (this call and an
// earlier one), or when the client was made WithWaitForPending. Otherwise
// it is another publisher's: a *events.CallIDTakenError, and this
// publication is not counted.
func (c *Client) judgePending(call events.Call) error {
	if c.waitForPending || c.sent.count(sentKey(call), time.Now()) >= 2 {
		return nil
	}
	c.sent.undo(sentKey(call))
	return &events.CallIDTakenError{Tenant: call.Tenant, Tool: call.Tool, CallID: call.CallID}
}

// sentKey is what sentIDs keeps of a call: its tenant, tool and id, which
// name it.
func sentKey(call events.Call) string { return call.Tenant + "/" + call.Tool + "/" + call.CallID }

// call publishes call and waits for its answer; see Call. Every answer is
// returned with a nil error.
func (c *Client) call(ctx context.Context, call events.Call) (events.Answer, error) {
	msg, err := c.callMsg(call)
	if err != nil {
		return events.Answer{}, err
	}
	// Any run: a tenant, tool and call id name one call, and one published
	// before under another run (a retry from a new session that did not know
	// the first run) is answered with the first publication's answer.
	filter := wire.AnswerFilter(call.Tenant, call.Tool, "*", call.CallID)
	ch := make(chan *nats.Msg, 4)
	sub, err := c.nc.ChanSubscribe(filter, ch)
	if err != nil {
		return events.Answer{}, fmt.Errorf("toolexec: subscribing to %s: %w", filter, err)
	}
	defer sub.Unsubscribe()
	// The subscription hears answers while its connection lives: one
	// published while the connection was lost is looked for in the stream.
	life := connloss.Context(c.nc)
	ack, err := c.publish(ctx, msg, call.Tenant, call.CallID)
	pending := errors.Is(err, errPending)
	switch {
	case pending:
		// The call that holds the subject may have been answered a moment ago,
		// its acknowledgement not yet in: then its answer is stored, or about
		// to be.
		if a, found := c.answeredJustNow(ctx, call.Tenant, filter); found {
			return a, nil
		}
		if err := c.judgePending(call); err != nil {
			return events.Answer{}, err
		}
	case err != nil:
		return events.Answer{}, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// lookup looks for the answer stored in TOOLEXEC_EVENTS until it is found:
	// the live subscription does not hear one stored before it, nor the
	// answer to a repeat that an executor acknowledges without answering it
	// again. A look that fails (no executor answers the history service yet)
	// is tried again.
	lookup := func() <-chan lookupResult {
		stored := make(chan lookupResult, 1)
		look := func(ctx context.Context) (events.Answer, bool, error) {
			a, found, err := c.findStored(ctx, call.Tenant, filter)
			if err != nil && !errors.Is(err, ErrBadAnswer) {
				c.log.Debug("looking for a call's stored answer failed; trying again", "call_id", call.CallID, "error", err)
				return a, false, nil
			}
			return a, found, err
		}
		go func() {
			if a, found, err := look(lctx); found {
				stored <- lookupResult{a, err}
				return
			}
			lookAgain(lctx, look, stored)
		}()
		return stored
	}
	var stored <-chan lookupResult
	if pending || wire.IsRepeat(msg.Header) || ack.Duplicate {
		// Published before, perhaps answered before this subscription existed:
		// read the stream too.
		stored = lookup()
	}
	return c.await(ctx, call.CallID, ch, stored, life, lookup)
}

// callError restates an error of a call without an answer in the terms Call
// promises: the call's tool in a rejection, an *events.NoAnswerError when
// ctx ended, an explanation when no stream takes the tenant's calls.
func (c *Client) callError(ctx context.Context, call events.Call, err error) error {
	if contextEnded(ctx) != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return &events.NoAnswerError{Tenant: call.Tenant, Tool: call.Tool, RunID: call.RunID, CallID: call.CallID, Err: err}
	}
	return c.publishError(call, err)
}

// publishError restates an error of a call's publication: the call's tool in
// a rejection, an explanation when no stream takes the tenant's calls.
func (c *Client) publishError(call events.Call, err error) error {
	var re *events.RejectedError
	switch {
	case errors.As(err, &re):
		if re.Tool == "" {
			re.Tool = call.Tool
		}
		return re
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w (no stream takes tenant %s's calls: no executor has run against this NATS server "+
			"to create the streams, the connection reaches another server than the executors', or its account does not "+
			"import toolexec.call.%s.>)", err, call.Tenant, call.Tenant)
	}
	return err
}

// encodeArgs returns args as the JSON text of a call's arguments.
func encodeArgs(args any) (json.RawMessage, error) {
	switch v := args.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return b, nil
}
