package toolexec

import (
	"fmt"
	"log/slog"

	"github.com/tesserix/toolexec/events"
)

// DefaultSource is the CloudEvents source of a client's calls unless
// WithSource names another.
const DefaultSource = "/toolexec/client"

// ClientOption configures a Client; see NewClient.
type ClientOption func(*clientOptions) error

type clientOptions struct {
	source         string
	binary         bool
	log            *slog.Logger
	runID          string
	history        HistoryPath
	waitForPending bool
}

// WithSource sets the CloudEvents source of the client's calls, which names the
// agent that makes them; default DefaultSource.
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

// WithLogger sets where the client logs the events a watch skips and the reads
// it tries again; default slog.Default().
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

// WithHistoryPath sets how the client reads the events stored in
// TOOLEXEC_EVENTS (Attach, Find, Watch, and Call for a call that may repeat
// one): default HistoryAuto. It returns an error matching ErrInvalidOption for
// a value that is not a HistoryPath.
func WithHistoryPath(p HistoryPath) ClientOption {
	return func(o *clientOptions) error {
		if p < HistoryAuto || p > HistoryViaService {
			return fmt.Errorf("%w: WithHistoryPath: %d is not a HistoryPath", ErrInvalidOption, p)
		}
		o.history = p
		return nil
	}
}

// WithWaitForPending makes Call wait for the answer of a call of the same
// tenant, tool and call id that waits in the calls stream, whoever published
// it, instead of returning an *events.CallIDTakenError (and Publish report it
// stored, Duplicate). It is for a client that calls on behalf of many callers
// of a tenant, each of whom may name the id of its own earlier call to get
// its answer, as an MCP gateway does.
func WithWaitForPending() ClientOption {
	return func(o *clientOptions) error { o.waitForPending = true; return nil }
}

// CallOption adjusts one call; see Call and Publish.
type CallOption func(*callSettings)

// callSettings is the call that CallOptions build, and whether its id was
// chosen by the caller (WithCallID).
type callSettings struct {
	call   events.Call
	chosen bool
}

// WithRunID puts the call in run runID. The run is part of the idempotency key:
// two calls of one tool with the same key arguments are one effect within a
// run, and two effects in two runs. Default: the client's run (Client.RunID).
func WithRunID(runID string) CallOption { return func(s *callSettings) { s.call.RunID = runID } }

// WithCallID gives the call the id callID instead of a fresh one (NewCallID).
// A tenant, tool and call id name one call: calling again with the id of an
// earlier call gets that call's answer instead of running it again, whoever
// published it (the call is marked as a possible repeat, and the executors
// and the client both look for the stored answer). An id that a call of the
// same tenant and tool holds while it waits to be answered, one that this
// client did not publish, is refused with an *events.CallIDTakenError (unless
// WithWaitForPending); another tenant's ids never are.
func WithCallID(callID string) CallOption {
	return func(s *callSettings) { s.call.CallID, s.chosen = callID, true }
}

// WithFreshCallID gives the call the id callID, which the caller drew and no
// call has had (NewCallID draws one), for a caller that needs a new call's id
// before it is published: to store it first, or to hear the call's
// interactions (Client.Interactions). Unlike WithCallID, the call is not
// marked as a possible repeat, so nobody looks for an earlier answer first;
// an id used before may run the tool again.
func WithFreshCallID(callID string) CallOption {
	return func(s *callSettings) { s.call.CallID, s.chosen = callID, false }
}

// WithTraceParent continues the W3C trace context traceparent (and tracestate,
// which may be empty): the executor's spans, and an HTTP tool's request, join
// that trace.
func WithTraceParent(traceparent, tracestate string) CallOption {
	return func(s *callSettings) { s.call.TraceParent, s.call.TraceState = traceparent, tracestate }
}

// WithInteractions declares what the caller answers when the call's body asks
// it something while it runs (an upstream MCP server's requests):
// wire.CanElicit, wire.CanSample. The caller reads the requests from
// Client.Interactions, subscribed before the call. Default: nothing, and every
// such request is refused at once.
func WithInteractions(can ...string) CallOption {
	return func(s *callSettings) { s.call.Interactions = can }
}
