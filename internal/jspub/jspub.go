// Package jspub publishes a message to a JetStream stream and waits for its
// PubAck, as jetstream.JetStream.PublishMsg without options does, but reads
// the PubAck without encoding/json's reflection.
//
// Every call toolexec runs waits for three PubAcks (the claim, the record, the
// answer) and its caller for one more. nats.go decodes each with
// json.Unmarshal into a struct, a few microseconds apiece, which the profile of
// a busy executor showed as one of its larger single costs. The server writes
// a PubAck as a flat object of a stream name, a sequence and at most a few
// flags, and a refusal (a claim of a taken key) as that with an error object
// of three members; Parse reads exactly those shapes by hand and hands
// anything else (an escape in a string, a member it does not know, a repeated
// one) to encoding/json, so that its answers are json.Unmarshal's for every
// input (FuzzParse holds it to that).
package jspub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RetryWait and RetryAttempts are nats.go's: a publish nobody answered
// (no responders, as during a leader election) is tried again this many times,
// this long apart.
const (
	RetryWait     = jetstream.DefaultPubRetryWait
	RetryAttempts = jetstream.DefaultPubRetryAttempts
)

// Publisher publishes on one connection.
type Publisher struct {
	// Conn is the connection messages are published on.
	Conn *nats.Conn
	// Timeout bounds a publish whose context has no deadline (nats.go applies
	// its JetStream context's default timeout the same way).
	Timeout time.Duration
}

// New returns a publisher on js's connection, bounding a publish without a
// deadline by js's default timeout, as js.PublishMsg does.
func New(js jetstream.JetStream) Publisher {
	return Publisher{Conn: js.Conn(), Timeout: js.Options().DefaultTimeout}
}

// PublishMsg stores m in the stream its subject belongs to and returns the
// PubAck, with jetstream.JetStream.PublishMsg's errors: a server error is a
// *jetstream.APIError (wrapped), no stream is jetstream.ErrNoStreamResponse,
// an unreadable answer is jetstream.ErrInvalidJSAck. It takes no options: set
// the headers (Nats-Msg-Id, Nats-Expected-Stream, ...) on m instead.
func (p Publisher) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if len(opts) > 0 {
		return nil, fmt.Errorf("jspub: publish options are not supported (set m's headers): %w", jetstream.ErrInvalidOption)
	}
	if _, ok := ctx.Deadline(); !ok && p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	resp, err := p.Conn.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < RetryAttempts; r++ {
		t := time.NewTimer(RetryWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		resp, err = p.Conn.RequestMsgWithContext(ctx, m)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return nil, err
	}
	return Parse(resp.Data)
}

// Parse reads a PubAck as jetstream.JetStream.PublishMsg does: the server's
// error wrapped (a *jetstream.APIError), jetstream.ErrInvalidJSAck for an
// answer that is not a PubAck, or the PubAck.
func Parse(b []byte) (*jetstream.PubAck, error) {
	if ack, apiErr, ok := parseFlat(b); ok {
		if apiErr != nil {
			return nil, fmt.Errorf("nats: %w", apiErr)
		}
		if ack.Stream == "" {
			return nil, jetstream.ErrInvalidJSAck
		}
		return ack, nil
	}
	return parseJSON(b)
}

// response is an answer to a publish, as nats.go reads it.
type response struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	*jetstream.PubAck
}

// parseJSON is Parse by encoding/json.
func parseJSON(b []byte) (*jetstream.PubAck, error) {
	var r response
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return nil, fmt.Errorf("nats: %w", r.Error)
	}
	if r.PubAck == nil || r.PubAck.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return r.PubAck, nil
}

// parseFlat reads b if it is an answer in the shape the server writes: one
// object whose members are stream, domain, val (strings without escapes),
// seq (an unsigned integer), duplicate (true or false) and error (an object
// of code, err_code and description), each at most once, with JSON
// whitespace anywhere between tokens. ok is false for anything else, which
// parseJSON then reads.
func parseFlat(b []byte) (ack *jetstream.PubAck, apiErr *jetstream.APIError, ok bool) {
	p := flat{b: b}
	var a jetstream.PubAck
	ok = p.object(func(name []byte) bool {
		switch string(name) {
		case "stream":
			s, ok := p.str()
			a.Stream = string(s)
			return ok
		case "seq":
			n, ok := p.uint(1<<64 - 1)
			a.Sequence = n
			return ok
		case "duplicate":
			v, ok := p.boolean()
			a.Duplicate = v
			return ok
		case "domain":
			s, ok := p.str()
			a.Domain = string(s)
			return ok
		case "val":
			s, ok := p.str()
			a.Value = string(s)
			return ok
		case "error":
			apiErr = &jetstream.APIError{}
			return p.object(func(name []byte) bool {
				switch string(name) {
				case "code":
					n, ok := p.uint(1<<31 - 1)
					apiErr.Code = int(n)
					return ok
				case "err_code":
					n, ok := p.uint(1<<16 - 1)
					apiErr.ErrorCode = jetstream.ErrorCode(n)
					return ok
				case "description":
					s, ok := p.str()
					apiErr.Description = string(s)
					return ok
				}
				return false
			})
		}
		return false
	})
	if ok {
		p.space()
	}
	if !ok || p.i != len(p.b) {
		return nil, nil, false
	}
	return &a, apiErr, true
}

// flat is a cursor over a flat JSON object.
type flat struct {
	b []byte
	i int
}

// object reads an object whose member values member reads (given the
// member's name, the cursor on its value). Each name may appear once.
func (p *flat) object(member func(name []byte) bool) bool {
	p.space()
	if !p.byte('{') {
		return false
	}
	p.space()
	if p.byte('}') {
		return true
	}
	var names [8][]byte // slices of p.b: no copies
	n := 0
	for {
		p.space()
		name, ok := p.str()
		if !ok {
			return false
		}
		for _, seen := range names[:n] {
			if bytes.Equal(seen, name) {
				return false // a repeated member: encoding/json's rules apply
			}
		}
		if n == len(names) {
			return false
		}
		names[n] = name
		n++
		p.space()
		if !p.byte(':') {
			return false
		}
		p.space()
		if !member(name) {
			return false
		}
		p.space()
		if p.byte(',') {
			continue
		}
		return p.byte('}')
	}
}

func (p *flat) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *flat) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes.
func (p *flat) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c < 0x20 || c == '\\' || c >= 0x80:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// uint reads an unsigned integer without leading zeros, at most limit.
func (p *flat) uint(limit uint64) (uint64, bool) {
	start := p.i
	var n uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
		p.i++
	}
	digits := p.i - start
	if digits == 0 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

func (p *flat) boolean() (bool, bool) {
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}
