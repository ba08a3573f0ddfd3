package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tesserix/toolexec/tool"
)

// The MCP methods an upstream may send its client that are relayed to the
// caller of the call they belong to (or refused), and the notifications
// recorded.
const (
	methodElicit        = "elicitation/create"
	methodSample        = "sampling/createMessage"
	methodRoots         = "roots/list"
	notifyProgress      = "notifications/progress"
	notifyMessage       = "notifications/message"
	answerWriteTimeout  = 10 * time.Second
	maxInputRoundTrips  = 8
	maxRelayedEventSize = 1 << 20
	// multiRoundTrip is the first protocol version whose requests carry
	// their log level in _meta.
	multiRoundTrip = "2026-07-28"
	// relayedLogLevel is the least level of the log messages asked of an
	// upstream.
	relayedLogLevel = "info"
)

// serve answers a request the upstream sent its client: an elicitation or
// sampling request of a call in flight is relayed to that call's caller
// (tool.Caller), and anything else, or a request whose call cannot be told,
// is refused at once. The answer is written from a goroutine of its own, so
// that reading goes on meanwhile.
func (c *probeConn) serve(req *jsonrpc.Request) {
	p := c.owner(req.ID)
	go func() {
		var (
			result json.RawMessage
			err    error
		)
		switch {
		case req.Method != methodElicit && req.Method != methodSample:
			err = &tool.CallerError{Code: tool.CallerCodeMethodNotFound, Message: "toolexec does not answer " + req.Method}
		case p == nil:
			err = &tool.CallerError{Code: tool.CallerCodeInternal,
				Message: "toolexec cannot tell which call " + req.Method + " belongs to: send it on the stream of the tools/call it serves"}
		default:
			result, err = p.caller.Ask(p.ctx, req.Method, req.Params)
		}
		resp := &jsonrpc.Response{ID: req.ID, Result: result}
		if err != nil {
			resp.Result = nil
			var ce *tool.CallerError
			if !errors.As(err, &ce) {
				ce = &tool.CallerError{Code: tool.CallerCodeInternal, Message: err.Error()}
			}
			resp.Error = &jsonrpc.Error{Code: int64(ce.Code), Message: ce.Message, Data: ce.Data}
		}
		ctx, cancel := context.WithTimeout(context.Background(), answerWriteTimeout)
		defer cancel()
		_ = c.Write(ctx, resp)
	}()
}

// owner returns the call a request of the upstream belongs to: over HTTP,
// the call on whose response stream it came; over stdio, which has no
// streams, the call in flight when it is the only one. Nil when it cannot be
// told.
func (c *probeConn) owner(id jsonrpc.ID) *probe {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil {
		p := c.related[id]
		delete(c.related, id)
		return p
	}
	return c.only()
}

// only returns the one call in flight, nil when there are none or several;
// c.mu is held.
func (c *probeConn) only() *probe {
	if len(c.waiting) != 1 {
		return nil
	}
	for _, p := range c.waiting {
		return p
	}
	return nil
}

// notify records a notification the upstream sent: progress by its token,
// which names the call; a log message (stdio only: over HTTP the tap of the
// call's stream records it) when one call is in flight.
func (c *probeConn) notify(req *jsonrpc.Request) {
	switch req.Method {
	case notifyProgress:
		var t struct {
			Token json.RawMessage `json:"progressToken"`
		}
		if json.Unmarshal(req.Params, &t) != nil {
			return
		}
		c.mu.Lock()
		var p *probe
		for _, q := range c.waiting {
			if q.token != "" && string(t.Token) == `"`+q.token+`"` {
				p = q
				break
			}
		}
		c.mu.Unlock()
		if p != nil {
			p.caller.Notify(notifyProgress, req.Params)
		}
	case notifyMessage:
		if c.out == nil {
			return
		}
		c.mu.Lock()
		p := c.only()
		c.mu.Unlock()
		if p != nil {
			p.caller.Notify(notifyMessage, req.Params)
		}
	}
}

// relate notes that the request id came on p's stream.
func (c *probeConn) relate(id jsonrpc.ID, p *probe) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.related == nil {
		c.related = map[jsonrpc.ID]*probe{}
	}
	c.related[id] = p
}

// sseTap reads the response stream of one tools/call POST as the SDK does,
// and notes what came on it: the ids of the upstream's requests (which call
// they belong to) and its log messages (recorded for that call).
type sseTap struct {
	io.ReadCloser
	p     *probe
	conn  *probeConn
	buf   []byte // an unfinished line
	data  bytes.Buffer
	large bool // the event is larger than relayed events may be
}

func (t *sseTap) Read(b []byte) (int, error) {
	n, err := t.ReadCloser.Read(b)
	if n > 0 {
		t.feed(b[:n])
	}
	return n, err
}

// feed takes the bytes of the stream, line by line: data lines are gathered,
// and an empty line ends an event.
func (t *sseTap) feed(b []byte) {
	t.buf = append(t.buf, b...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			if len(t.buf) > maxRelayedEventSize {
				t.buf, t.large = t.buf[:0], true
			}
			return
		}
		line := strings.TrimSuffix(string(t.buf[:i]), "\r")
		t.buf = t.buf[i+1:]
		switch {
		case line == "":
			t.event()
		case strings.HasPrefix(line, "data:"):
			if t.data.Len()+len(line) > maxRelayedEventSize {
				t.large = true
				continue
			}
			if t.data.Len() > 0 {
				t.data.WriteByte('\n')
			}
			t.data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

// event handles one whole event of the stream.
func (t *sseTap) event() {
	defer func() { t.data.Reset(); t.large = false }()
	if t.large || t.data.Len() == 0 {
		return
	}
	msg, err := jsonrpc.DecodeMessage(t.data.Bytes())
	if err != nil {
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	switch {
	case !ok:
	case req.IsCall():
		t.conn.relate(req.ID, t.p)
	case req.Method == notifyMessage:
		t.p.caller.Notify(notifyMessage, req.Params)
	}
}

// inputRequired is an input-required result (multi round-trip requests):
// what the upstream needs before it goes on, and the state to send back.
type inputRequired struct {
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
}

// fulfil asks the caller each of an input-required result's requests, one
// after the other, and returns the responses to send back with the retried
// tools/call. Any request the caller does not answer makes it fail: the
// upstream did not proceed, so the call fails without effect.
func (u *Upstream) fulfil(ctx context.Context, tc tool.Context, remote string, raw json.RawMessage) (responses map[string]json.RawMessage, state string, err error) {
	var ir inputRequired
	if err := json.Unmarshal(raw, &ir); err != nil || len(ir.InputRequests) == 0 {
		return nil, "", tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q: it asked for nothing it can be given", ErrInputRequired, u.cfg.Name, remote))
	}
	caller := tool.CallerFrom(ctx)
	responses = make(map[string]json.RawMessage, len(ir.InputRequests))
	for id, r := range ir.InputRequests {
		if r.Method != methodElicit && r.Method != methodSample {
			return nil, "", tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q: toolexec does not answer %s", ErrInputRequired, u.cfg.Name, remote, r.Method))
		}
		res, err := caller.Ask(ctx, r.Method, r.Params)
		if err != nil {
			return nil, "", tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q: %s: %w", ErrInputRequired, u.cfg.Name, remote, r.Method, err))
		}
		responses[id] = res
	}
	return responses, ir.RequestState, nil
}
