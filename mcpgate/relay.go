package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
)

// multiRoundTrip is the first protocol version in which a server may not
// send its client requests while it serves one: it must answer
// input-required instead (SEP-2322).
const multiRoundTrip = "2026-07-28"

// clientInteractions returns what the client of s declared it can answer:
// elicitation, sampling; and whether its protocol version forbids a server's
// requests while it serves one (mrtr: the client is asked in an
// input-required result instead).
func clientInteractions(s *mcp.ServerSession) (can []string, mrtr bool) {
	if s == nil {
		return nil, false
	}
	ip := s.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return nil, false
	}
	var out []string
	if ip.Capabilities.Elicitation != nil {
		out = append(out, wire.CanElicit)
	}
	if ip.Capabilities.Sampling != nil {
		out = append(out, wire.CanSample)
	}
	return out, ip.ProtocolVersion >= multiRoundTrip
}

// statePrefix starts the request state of the gateway's input-required
// results: "toolexec/1 <call_id> <run_id>".
const statePrefix = "toolexec/1 "

// callState is what an input-required result's request state names: the
// call that waits.
type callState struct{ callID, runID string }

// parseState reads a request state the gateway made; ok is false for any
// other (none, or the upstream's own, which never reaches the gateway).
func parseState(s string) (callState, bool) {
	rest, ok := strings.CutPrefix(s, statePrefix)
	if !ok {
		return callState{}, false
	}
	callID, runID, ok := strings.Cut(rest, " ")
	if !ok || events.CheckToken("callid", callID) != nil || events.CheckToken("runid", runID) != nil {
		return callState{}, false
	}
	return callState{callID: callID, runID: runID}, true
}

// inputRequired is the result that asks the client in, the request of the
// call's body, to answer it and call again.
func inputRequired(in toolexec.Interaction, callID, runID string) (*mcp.CallToolResult, error) {
	var r mcp.InputRequest
	switch in.Method {
	case wire.MethodElicit:
		p, err := elicitParams(in.Params)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call's elicitation request cannot be read: " + err.Error()}
		}
		r = p
	default:
		var p mcp.CreateMessageWithToolsParams
		if err := json.Unmarshal(in.Params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call's sampling request cannot be read: " + err.Error()}
		}
		r = &p
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{in.ID: r}, RequestState: statePrefix + callID + " " + runID}, nil
}

// elicitParams reads an elicitation request, keeping its schema as the
// upstream wrote it.
func elicitParams(raw json.RawMessage) (*mcp.ElicitParams, error) {
	var p mcp.ElicitParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	var s struct {
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}
	if json.Unmarshal(raw, &s) == nil && len(s.RequestedSchema) > 0 {
		p.RequestedSchema = s.RequestedSchema
	}
	return &p, nil
}

// answerInputs sends the executor the client's answers to the requests of an
// input-required result.
func (ts *tenantServer) answerInputs(ctx context.Context, ix *toolexec.Interactions, responses mcp.InputResponseMap) {
	for id, r := range responses {
		b, err := json.Marshal(r)
		if err == nil {
			err = ix.Answer(ctx, id, b, nil)
		}
		if err != nil {
			ts.g.log.Debug("mcp: answering an interaction failed", "id", id, "error", err)
		}
	}
}

// follow relays to the client, while a call waits, what the executor running
// it sends: its requests, asked of the client (when it declared it can
// answer them) or refused at once, and its notes, as progress and log
// notifications. A client that sent a progressToken also gets a progress
// notification every ProgressEvery until the call's own progress comes;
// from then on the call's progress is relayed, counted on from the last
// value the client was sent, so that it never goes back. The returned func
// stops it.
//
// With inputs set (a client on a protocol with multi round-trip requests), a
// request the client can answer is taken, sent on inputs, and the call's wait
// interrupted: the handler answers input-required.
func (ts *tenantServer) follow(ctx context.Context, req *mcp.CallToolRequest, callID string, ix *toolexec.Interactions, can []string,
	inputs chan<- toolexec.Interaction, interrupt func()) (stop func()) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	done, finish := make(chan struct{}), make(chan struct{})
	token := req.Params.GetProgressToken()
	ss := req.Session
	go func() {
		defer close(done)
		start := time.Now()
		var tick <-chan time.Time
		if token != nil && ss != nil {
			t := time.NewTicker(ts.g.cfg.ProgressEvery)
			defer t.Stop()
			tick = t.C
		}
		var asks <-chan toolexec.Interaction
		var notes <-chan wire.Note
		if ix != nil {
			asks, notes = ix.Asks(), ix.Notes()
		}
		var (
			sent     float64 // the last progress sent
			base     float64 // where the call's own progress starts
			upstream bool    // the call's own progress has come
		)
		notify := func(ctx context.Context, p *mcp.ProgressNotificationParams) {
			if p.Progress <= sent {
				return
			}
			sent = p.Progress
			if err := ss.NotifyProgress(ctx, p); err != nil && ctx.Err() == nil {
				ts.g.log.Debug("mcp: progress notification failed", "call_id", callID, "error", err)
			}
		}
		relay := func(ctx context.Context, n wire.Note) {
			switch {
			case n.Kind == wire.NoteProgress && token != nil && ss != nil:
				if !upstream {
					upstream, base = true, sent
				}
				p := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: base + n.Progress, Message: n.Message}
				if n.Total > 0 {
					p.Total = base + n.Total
				}
				notify(ctx, p)
			case n.Kind == wire.NoteLog && ss != nil:
				var data any = n.Data
				if len(n.Data) == 0 {
					data = nil
				}
				if err := ss.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(n.Level), Logger: n.Logger, Data: data}); err != nil &&
					ctx.Err() == nil {
					ts.g.log.Debug("mcp: log notification failed", "call_id", callID, "error", err)
				}
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-finish:
				// The answer came: the notes the executor published before
				// it, already heard, go to the client first.
				for {
					select {
					case n := <-notes:
						relay(parent, n)
					default:
						return
					}
				}
			case <-tick:
				if !upstream {
					notify(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: sent + 1,
						Message: fmt.Sprintf("call %s: waiting for its answer (%s)", callID, time.Since(start).Round(time.Second))})
				}
			case in := <-asks:
				if inputs != nil {
					go ts.askInResult(ctx, ix, in, can, inputs, interrupt)
					continue
				}
				go ts.ask(ctx, ss, ix, in, can)
			case n := <-notes:
				relay(ctx, n)
			}
		}
	}()
	return func() { close(finish); <-done; cancel() }
}

// askInResult takes a request of the call's body for the handler to ask in
// an input-required result, or refuses it at once when the client did not
// declare it can answer it, or when the handler asks another already.
func (ts *tenantServer) askInResult(ctx context.Context, ix *toolexec.Interactions, in toolexec.Interaction, can []string,
	inputs chan<- toolexec.Interaction, interrupt func()) {
	capability := wire.Capability(in.Method)
	if capability == "" || !slices.Contains(can, capability) {
		if err := ix.Answer(ctx, in.ID, nil, &wire.RPCError{Code: tool.CallerCodeMethodNotFound,
			Message: "the MCP client did not declare that it can answer " + in.Method}); err != nil && ctx.Err() == nil {
			ts.g.log.Debug("mcp: refusing an interaction failed", "id", in.ID, "error", err)
		}
		return
	}
	if err := ix.Take(ctx, in.ID); err != nil {
		return
	}
	select {
	case inputs <- in:
		interrupt()
	default:
		_ = ix.Answer(ctx, in.ID, nil, &wire.RPCError{Code: tool.CallerCodeInternal, Message: "the client is being asked something else"})
	}
}

// ask relays one request of the call's body to the client and sends its
// answer back: refused at once when the client did not declare it can
// answer it, left alone when another caller of the call took it.
func (ts *tenantServer) ask(ctx context.Context, ss *mcp.ServerSession, ix *toolexec.Interactions, in toolexec.Interaction, can []string) {
	refuse := func(code int, msg string) {
		if err := ix.Answer(ctx, in.ID, nil, &wire.RPCError{Code: code, Message: msg}); err != nil && ctx.Err() == nil {
			ts.g.log.Debug("mcp: refusing an interaction failed", "id", in.ID, "error", err)
		}
	}
	capability := wire.Capability(in.Method)
	if ss == nil || capability == "" || !slices.Contains(can, capability) {
		refuse(tool.CallerCodeMethodNotFound, "the MCP client did not declare that it can answer "+in.Method)
		return
	}
	if err := ix.Take(ctx, in.ID); err != nil {
		if !errors.Is(err, toolexec.ErrInteractionTaken) && ctx.Err() == nil {
			ts.g.log.Debug("mcp: taking an interaction failed", "id", in.ID, "error", err)
		}
		return
	}
	actx := ctx
	if !in.Deadline.IsZero() {
		var cancel context.CancelFunc
		actx, cancel = context.WithDeadline(ctx, in.Deadline)
		defer cancel()
	}
	var (
		res any
		err error
	)
	switch in.Method {
	case wire.MethodElicit:
		var p *mcp.ElicitParams
		if p, err = elicitParams(in.Params); err == nil {
			res, err = ss.Elicit(actx, p)
		}
	case wire.MethodSample:
		var p mcp.CreateMessageWithToolsParams
		if err = json.Unmarshal(in.Params, &p); err == nil {
			res, err = ss.CreateMessageWithTools(actx, &p)
		}
	}
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			if err := ix.Answer(ctx, in.ID, nil, &wire.RPCError{Code: int(we.Code), Message: we.Message, Data: we.Data}); err != nil &&
				ctx.Err() == nil {
				ts.g.log.Debug("mcp: answering an interaction failed", "id", in.ID, "error", err)
			}
			return
		}
		refuse(tool.CallerCodeInternal, "the MCP client did not answer "+in.Method+": "+err.Error())
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		refuse(tool.CallerCodeInternal, "the MCP client's answer cannot be sent: "+err.Error())
		return
	}
	if err := ix.Answer(ctx, in.ID, b, nil); err != nil && ctx.Err() == nil {
		ts.g.log.Debug("mcp: answering an interaction failed", "id", in.ID, "error", err)
	}
}
