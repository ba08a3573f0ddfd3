package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
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
	c.answer(req, c.owner(req.ID))
}

// answer answers req, as serve says, on behalf of the call p (nil: none).
func (c *probeConn) answer(req *jsonrpc.Request, p *probe) {
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
				Message: "toolexec cannot tell which call " + req.Method + " belongs to: send it on the stream of the tools/call it serves, or " +
					"while that call is the only one in flight"}
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
// streams, the call in flight when it is the only one (see offStream for
// the standalone stream of HTTP). Nil when it cannot be told.
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

// only returns the one call in flight, nil when there are none or several,
// or when a call of another tenant ended here without its answer within
// orphanWindow (the upstream may still be running it, and a request off any
// call's stream may be its: it must not reach another tenant's caller); c.mu
// is held.
func (c *probeConn) only() *probe {
	if len(c.waiting) != 1 {
		return nil
	}
	var p *probe
	for _, q := range c.waiting {
		p = q
	}
	now := time.Now()
	for tenant, until := range c.orphans {
		switch {
		case now.After(until):
			delete(c.orphans, tenant)
		case tenant != p.tenant:
			return nil
		}
	}
	return p
}

// notify records a notification the upstream sent: progress by its token,
// which names the call; a log message (over stdio, or off any call's stream
// over HTTP: the tap of a call's stream records those on it) when one call is
// in flight.
func (c *probeConn) notify(req *jsonrpc.Request, offStream bool) {
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
		if c.out == nil && !offStream {
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

// offStream handles a message the upstream sent on the session's standalone
// stream (HTTP), that is on no call's stream: a request is answered (ping) or
// relayed to the caller of the call in flight when it is the only one, and
// refused at once otherwise; progress and log notifications are recorded as
// notify says; anything else is dropped.
func (c *probeConn) offStream(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	switch {
	case !ok:
	case req.IsCall() && req.Method == "ping":
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), answerWriteTimeout)
			defer cancel()
			_ = c.Write(ctx, &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)})
		}()
	case req.IsCall():
		c.mu.Lock()
		p := c.only()
		c.mu.Unlock()
		c.answer(req, p)
	case req.Method == notifyProgress || req.Method == notifyMessage:
		c.notify(req, true)
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
	p      *probe
	conn   *probeConn
	parser sseParser
}

func (t *sseTap) Read(b []byte) (int, error) {
	n, err := t.ReadCloser.Read(b)
	if n > 0 {
		t.parser.feed(b[:n], t.event)
	}
	return n, err
}

// event handles one whole event of the stream.
func (t *sseTap) event(data []byte) {
	msg, err := jsonrpc.DecodeMessage(data)
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

// sseParser splits a server-sent event stream into events, line by line:
// data lines are gathered, and an empty line ends an event. An event larger
// than maxRelayedEventSize is skipped. It keeps the last event id and retry
// delay the stream gave.
type sseParser struct {
	buf   []byte // an unfinished line
	data  bytes.Buffer
	large bool // the event is larger than relayed events may be
	id    string
	retry time.Duration
}

// feed takes the next bytes of the stream, and calls event with the data of
// each event they end.
func (s *sseParser) feed(b []byte, event func(data []byte)) {
	s.buf = append(s.buf, b...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			if len(s.buf) > maxRelayedEventSize {
				s.buf, s.large = s.buf[:0], true
			}
			return
		}
		line := strings.TrimSuffix(string(s.buf[:i]), "\r")
		s.buf = s.buf[i+1:]
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if !s.large && s.data.Len() > 0 {
				event(s.data.Bytes())
			}
			s.data.Reset()
			s.large = false
		case field == "data":
			if s.data.Len()+len(value) > maxRelayedEventSize {
				s.large = true
				continue
			}
			if s.data.Len() > 0 {
				s.data.WriteByte('\n')
			}
			s.data.WriteString(value)
		case field == "id" && !strings.ContainsRune(value, 0):
			s.id = value
		case field == "retry":
			if ms, err := strconv.ParseUint(value, 10, 31); err == nil {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
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
func (u *Upstream) fulfil(
	ctx context.Context, tc tool.Context, remote string, raw json.RawMessage,
) (responses map[string]json.RawMessage, state string, err error) {
	var ir inputRequired
	if err := json.Unmarshal(raw, &ir); err != nil || len(ir.InputRequests) == 0 {
		return nil, "",
			tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q: it asked for nothing it can be given", ErrInputRequired, u.cfg.Name, remote))
	}
	caller := tool.CallerFrom(ctx)
	responses = make(map[string]json.RawMessage, len(ir.InputRequests))
	for id, r := range ir.InputRequests {
		if r.Method != methodElicit && r.Method != methodSample {
			return nil, "",
				tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q: toolexec does not answer %s", ErrInputRequired, u.cfg.Name, remote,
					r.Method))
		}
		res, err := caller.Ask(ctx, r.Method, r.Params)
		if err != nil {
			return nil, "",
				tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q: %s: %w", ErrInputRequired, u.cfg.Name, remote, r.Method, err))
		}
		responses[id] = res
	}
	return responses, ir.RequestState, nil
}
