package toolexec

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// Interaction is a request the body of a call made of its caller (an
// upstream MCP server's elicitation/create or sampling/createMessage).
type Interaction struct {
	ID     string          // names it in Take and Answer
	Method string          // the MCP method
	Params json.RawMessage // its params, as the upstream sent them
	// Deadline is when the executor stops waiting for the answer; zero when
	// it did not say.
	Deadline time.Time
}

// Interactions is what the executor running one call sends its caller while
// the body runs: requests to answer ([Interactions.Asks]) and notes
// ([Interactions.Notes]). A caller subscribes with [Client.Interactions]
// before it publishes the call, declares in the call what it can answer
// (WithInteractions), and closes it when the call is answered.
type Interactions struct {
	nc                   *nats.Conn
	tenant, tool, callID string
	asks                 chan Interaction
	notes                chan wire.Note
	subs                 []*nats.Subscription
	log                  func(msg string, args ...any)
}

// Buffers of an Interactions: what does not fit is dropped (a request
// dropped is refused by the executor when no one takes it).
const (
	askBuffer  = 8
	noteBuffer = 64
)

// Interactions subscribes to what the executor running the call of tool
// named callID sends its caller: requests on its interaction subject, notes
// on its note filter (docs/PROTOCOL.md §13). Give the call its id with
// WithFreshCallID (or WithCallID). It returns an error matching
// events.ErrInvalidToken for a malformed token, or the subscription's.
func (c *Client) Interactions(tenant, tool, callID string) (*Interactions, error) {
	for _, f := range [][2]string{{"tenant", tenant}, {"tool", tool}, {"callid", callID}} {
		if err := events.CheckToken(f[0], f[1]); err != nil {
			return nil, err
		}
	}
	ix := &Interactions{nc: c.nc, tenant: tenant, tool: tool, callID: callID,
		asks: make(chan Interaction, askBuffer), notes: make(chan wire.Note, noteBuffer),
		log: func(msg string, args ...any) { c.log.Debug(msg, args...) }}
	asks, err := c.nc.Subscribe(wire.InteractSubject(tenant, tool, callID), ix.onAsk)
	if err != nil {
		return nil, fmt.Errorf("toolexec: subscribing to a call's interactions: %w", err)
	}
	ix.subs = append(ix.subs, asks)
	notes, err := c.nc.Subscribe(wire.NoteFilter(tenant, tool, callID), ix.onNote)
	if err != nil {
		ix.Close()
		return nil, fmt.Errorf("toolexec: subscribing to a call's notes: %w", err)
	}
	ix.subs = append(ix.subs, notes)
	return ix, nil
}

func (ix *Interactions) onAsk(m *nats.Msg) {
	var a wire.Ask
	if err := json.Unmarshal(m.Data, &a); err != nil || a.ID == "" || a.Method == "" {
		ix.log("skipping a malformed interaction request", "call_id", ix.callID)
		return
	}
	in := Interaction{ID: a.ID, Method: a.Method, Params: a.Params}
	if v, ok := wire.Get(m.Header, wire.DeadlineHeader); ok {
		in.Deadline, _ = time.Parse(time.RFC3339Nano, v)
	}
	select {
	case ix.asks <- in:
	default:
		ix.log("dropping an interaction request: too many waiting", "call_id", ix.callID)
	}
}

func (ix *Interactions) onNote(m *nats.Msg) {
	n, err := wire.DecodeNote(m.Subject, m.Data)
	if err != nil {
		return // an answer, or something else: not a note
	}
	select {
	case ix.notes <- n:
	default:
	}
}

// Asks delivers the requests of the call's body, in the order they came.
func (ix *Interactions) Asks() <-chan Interaction { return ix.asks }

// Notes delivers the call's notes (progress and log), in the order they
// came.
func (ix *Interactions) Notes() <-chan wire.Note { return ix.notes }

// Take tells the executor that this caller will answer the request id: no
// other caller may. It returns ErrInteractionTaken when another did first, and an error
// of the request otherwise (nats.ErrNoResponders once the call is over).
func (ix *Interactions) Take(ctx context.Context, id string) error {
	return ix.respond(ctx, wire.Respond{ID: id, Take: true})
}

// Answer sends the answer to the request id: its result, or, when rpcErr is
// set, a JSON-RPC error that refuses it. Errors as [Interactions.Take].
func (ix *Interactions) Answer(ctx context.Context, id string, result json.RawMessage, rpcErr *wire.RPCError) error {
	r := wire.Respond{JSONRPC: "2.0", ID: id, Result: result, Error: rpcErr}
	if rpcErr != nil {
		r.Result = nil
	} else if r.Result == nil {
		r.Result = json.RawMessage("{}")
	}
	return ix.respond(ctx, r)
}

func (ix *Interactions) respond(ctx context.Context, r wire.Respond) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	m, err := ix.nc.RequestWithContext(ctx, wire.RespondSubject(ix.tenant, ix.tool, ix.callID), b)
	if err != nil {
		return fmt.Errorf("toolexec: answering interaction %s: %w", r.ID, err)
	}
	var rep wire.RespondReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return fmt.Errorf("toolexec: answering interaction %s: the executor's reply: %w", r.ID, err)
	}
	if rep.Error != nil {
		if rep.Error.Code == wire.RespondTaken {
			return ErrInteractionTaken
		}
		return fmt.Errorf("toolexec: answering interaction %s: %w", r.ID, rep.Error)
	}
	return nil
}

// Close ends the subscriptions.
func (ix *Interactions) Close() {
	for _, s := range ix.subs {
		_ = s.Unsubscribe()
	}
}
