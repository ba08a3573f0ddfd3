package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/events"
)

// Kind is the kind of an answer: what happened to a call.
type Kind = events.Kind

// The kinds of answers. Call returns a Result for the first two and an error
// for the others.
const (
	Completed     = events.KindCompleted     // the tool ran and returned its outcome
	Deduplicated  = events.KindDeduplicated  // answered from the record of an earlier call with the same key
	Indeterminate = events.KindIndeterminate // nobody knows whether the effect landed (IndeterminateOutcomeError)
	Failed        = events.KindFailed        // the call failed definitely (FailedError)
	Rejected      = events.KindRejected      // the call was refused before anything happened (RejectedError)
)

// Answer is an answer or audit event as it is stored on the events stream; Watch
// delivers them.
type Answer = events.Answer

// Result is the answer to a call that has an outcome: its Kind is Completed, or
// Deduplicated when the outcome is that of an earlier call with the same key.
type Result struct {
	Kind    Kind
	Outcome string
	// Key is the call's idempotency key (64 hex digits): the same for every call
	// of the same effect. Empty for tools without an idempotency policy.
	Key string
	// Tenant, Tool, RunID and CallID name the call answered.
	Tenant, Tool, RunID, CallID string
	// Time is when the answer was made.
	Time time.Time
}

// ClientOption configures a Client; see NewClient.
type ClientOption func(*clientOptions) error

type clientOptions struct {
	source string
	binary bool
	log    *slog.Logger
	runID  string
}

// WithSource sets the CloudEvents source of the client's calls, which names the
// agent that makes them; default "/toolexec/client".
func WithSource(source string) ClientOption {
	return func(o *clientOptions) error {
		if source == "" {
			return fmt.Errorf("%w: WithSource: empty source", ErrInvalidOption)
		}
		o.source = source
		return nil
	}
}

// WithBinaryMode publishes calls in CloudEvents binary mode (attributes in ce-
// headers) instead of structured mode.
func WithBinaryMode() ClientOption {
	return func(o *clientOptions) error { o.binary = true; return nil }
}

// WithLogger sets where Watch logs events it skips; default slog.Default().
func WithLogger(l *slog.Logger) ClientOption {
	return func(o *clientOptions) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger: nil logger", ErrInvalidOption)
		}
		o.log = l
		return nil
	}
}

// WithDefaultRunID sets the run of the calls that name none (see WithRunID).
// Default: a fresh "run_" id drawn when the client is made.
func WithDefaultRunID(runID string) ClientOption {
	return func(o *clientOptions) error {
		if err := events.CheckToken("run id", runID); err != nil {
			return fmt.Errorf("%w: WithDefaultRunID: %w", ErrInvalidOption, err)
		}
		o.runID = runID
		return nil
	}
}

// Client publishes tool calls and waits for their answers over NATS JetStream.
// It is safe for concurrent use.
type Client struct {
	bc    *bus.Client
	runID string
	sent  *sentIDs
}

// NewClient returns a client on nc. It returns an error matching
// ErrInvalidOption for a nil connection or an option it cannot use.
func NewClient(nc *nats.Conn, opts ...ClientOption) (*Client, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: a NATS connection is required", ErrInvalidOption)
	}
	var o clientOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.runID == "" {
		o.runID = newID("run_")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("toolexec: %w", err)
	}
	c := &Client{runID: o.runID, sent: newSentIDs(sentWindow)}
	c.bc, err = bus.NewClient(js, bus.ClientConfig{Source: o.source, Binary: o.binary, Logger: o.log, OnPending: c.pending})
	if err != nil {
		return nil, fmt.Errorf("toolexec: %w", err)
	}
	return c, nil
}

// RunID returns the run of the calls that name none.
func (c *Client) RunID() string { return c.runID }

// CallOption adjusts one call; see Call.
type CallOption func(*events.Call)

// WithRunID puts the call in run runID. The run is part of the idempotency key:
// two calls of one tool with the same key arguments are one effect within a
// run, and two effects in two runs. Default: the client's run (Client.RunID).
func WithRunID(runID string) CallOption { return func(c *events.Call) { c.RunID = runID } }

// WithCallID gives the call the id callID instead of a fresh one (NewCallID).
// A tenant, tool and call id name one call: calling again with the id of an
// earlier call gets that call's answer instead of running it again, whoever
// published it (the executors and the client both look for the stored
// answer). An id that a call of the same tenant and tool holds while it waits
// to be answered, one that this client did not publish, is refused with a
// *CallIDTakenError; another tenant's ids never are.
func WithCallID(callID string) CallOption { return func(c *events.Call) { c.CallID = callID } }

// WithTraceParent continues the W3C trace context traceparent (and tracestate,
// which may be empty): the executor's spans, and an HTTP tool's request, join
// that trace.
func WithTraceParent(traceparent, tracestate string) CallOption {
	return func(c *events.Call) { c.TraceParent, c.TraceState = traceparent, tracestate }
}

// Call calls tool for tenant with args and waits for the answer.
//
// args is the JSON object of the tool's arguments: a json.RawMessage or []byte
// is sent as it is, nil as {}, anything else as encoding/json marshals it.
//
// A call that completed, or that was answered from the record of an earlier call
// with the same key (Deduplicated), returns its Result. Otherwise the error says
// what happened, for errors.As: *IndeterminateOutcomeError (the effect may or
// may not have landed; retrying will not run the tool again), *FailedError,
// *RejectedError (also for a call refused before anything was sent: a bad
// token, arguments that are not a JSON object), *CallIDTakenError, or a
// *NoAnswerError when ctx ends first (the call may still be answered: Attach
// finds the answer). When an answer arrived, the Result describing it is
// returned with its error.
func (c *Client) Call(ctx context.Context, tenant, tool string, args any, opts ...CallOption) (*Result, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, &events.RejectedError{Tool: tool, Code: events.CodeInvalidJSON, Field: "arguments", Message: err.Error(), Err: err}
	}
	call := events.Call{Tenant: tenant, Tool: tool, RunID: c.runID, Arguments: raw}
	for _, opt := range opts {
		opt(&call)
	}
	if call.CallID == "" {
		call.CallID = NewCallID()
	} else {
		// A chosen id may have been published before: the executors then
		// answer from the stored answer, and so does Call.
		call.Repeat = true
		c.sent.add(sentKey(call), time.Now())
	}
	a, err := c.bc.Call(ctx, call)
	if err != nil {
		if errors.Is(err, events.ErrCallIDTaken) {
			c.sent.undo(sentKey(call))
		}
		return nil, c.callError(ctx, call, err)
	}
	return resultOf(a)
}

// sentWindow is how long the client remembers an id it chose and published,
// to tell its own earlier call, still waiting in the calls stream, from
// another publisher's (see pending).
const sentWindow = 2 * time.Minute

// pending judges a call the calls stream refused because a call of the same
// tenant, tool and call id waits there: this client's own, if it published
// the id at least twice within sentWindow (this call and an earlier one),
// whose answer Call waits for; another publisher's if this is its only
// publication, a *CallIDTakenError.
func (c *Client) pending(call events.Call) error {
	if c.sent.count(sentKey(call), time.Now()) < 2 {
		return &events.CallIDTakenError{Tenant: call.Tenant, Tool: call.Tool, CallID: call.CallID}
	}
	return nil
}

// sentKey is what sentIDs keeps of a call: its tenant, tool and id, which
// name it.
func sentKey(call events.Call) string { return call.Tenant + "/" + call.Tool + "/" + call.CallID }

// Attach waits for the answer to a call published earlier, by this client or
// another (after a restart, or a *NoAnswerError): from the events stream if it
// is stored, else the moment it is. Its results and errors are Call's, and one
// matching ErrNoHistoryService when the client's account has no JetStream and
// no executor answers the tenant's history requests.
//
// A client whose NATS account has JetStream gets the stored answer from the
// stream with one message get, making no consumer. A tenant in an account of its own, which imports its
// subjects from the executors' account and no JetStream API, asks the
// executors' history service (toolexec.history.<tenant>) instead: the client
// turns to it by itself the first time JetStream answers that the account has
// none. The operators' account, which imports no tenant's history subject,
// is answered on toolexec.admin.history when nothing answers the tenant's
// (bus.HistoryViaService says the rule).
func (c *Client) Attach(ctx context.Context, tenant, tool, runID, callID string) (*Result, error) {
	a, err := c.bc.Attach(ctx, tenant, tool, runID, callID)
	if err != nil {
		return nil, c.callError(ctx, events.Call{Tenant: tenant, Tool: tool, RunID: runID, CallID: callID}, err)
	}
	return resultOf(a)
}

// ToolDecl is what the executors declare about one tool: its name,
// description, parameters schema and idempotency policy; see Client.Tools.
type ToolDecl = bus.ToolDecl

// Tools returns the declarations of the tools the executors serve, sorted by
// name, as they answer on toolexec.tools.<tenant>: what an agent may call, and
// what repeating each call does. It returns an error matching
// bus.ErrNoCatalogService when no executor answers.
func (c *Client) Tools(ctx context.Context, tenant string) ([]ToolDecl, error) {
	return c.bc.Tools(ctx, tenant)
}

// WatchOption adjusts where Watch starts; see WatchFromStart and WatchSince.
type WatchOption = bus.WatchOption

// WatchFromStart makes Watch deliver every stored event that matches, then new
// ones.
func WatchFromStart() WatchOption { return bus.WatchFromStart() }

// WatchSince makes Watch deliver the stored events from t on, then new ones.
func WatchSince(t time.Time) WatchOption { return bus.WatchSince(t) }

// Watch delivers the answers and audit events whose subject matches filter, in
// the order they were stored, with no gaps: "toolexec.event.acme.>" for one
// tenant, "toolexec.event.*.indeterminate.>" for an auditor, "" for every
// event. By default it starts with events stored after it returns. The channel
// is closed when ctx ends.
//
// That holds where the client's account has JetStream. A client without it
// (see Attach) watches through the executors' history service: a tenant's
// filter must name its tenant ("toolexec.event.acme.>"), while a filter with
// a wildcard in the tenant's place is read through toolexec.admin.history,
// which serves the operators' account only; the stored events come in
// order, and then the live ones as a plain subscription hears them, which
// misses those published while the connection is down and drops some if the
// reader falls far behind (bus.Client.Watch says how far).
func (c *Client) Watch(ctx context.Context, filter string, opts ...WatchOption) (<-chan Answer, error) {
	return c.bc.Watch(ctx, filter, opts...)
}

// resultOf turns an answer into Call's returns.
func resultOf(a events.Answer) (*Result, error) {
	r := &Result{
		Kind: a.Kind, Outcome: a.Outcome, Key: a.Key,
		Tenant: a.Tenant, Tool: a.Tool, RunID: a.RunID, CallID: a.CallID, Time: a.Time,
	}
	return r, a.Err()
}

// callError restates an error of the bus client in this package's terms.
func (c *Client) callError(ctx context.Context, call events.Call, err error) error {
	var re *events.RejectedError
	switch {
	case errors.As(err, &re):
		if re.Tool == "" {
			re.Tool = call.Tool
		}
		return re
	case ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		return &events.NoAnswerError{Tenant: call.Tenant, Tool: call.Tool, RunID: call.RunID, CallID: call.CallID, Err: err}
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("toolexec: %w (no stream takes tenant %s's calls: no executor has run against this NATS server "+
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
