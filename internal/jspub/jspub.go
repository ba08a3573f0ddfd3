// Package jspub publishes a message to a JetStream stream and waits for its
// PubAck, as jetstream.JetStream.PublishMsg without options does, but reads
// the PubAck without encoding/json's reflection.
//
// Every call toolexec runs waits for three PubAcks (the claim, the record, the
// answer) and its caller for one more. nats.go decodes each with
// json.Unmarshal into a struct, a few microseconds apiece, which the profile of
// a busy executor showed as one of its larger single costs. The server writes
// a PubAck as a flat object of a stream name, a sequence and at most a few
// flags; Parse reads exactly that shape by hand and hands anything else (an
// error, an escape in a string, a member it does not know) to encoding/json,
// so that its answers are json.Unmarshal's for every input (FuzzParse holds it
// to that).
package jspub

import (
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
	if ack, ok := parseFlat(b); ok {
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

// parseFlat reads b if it is a PubAck in the shape the server writes: one
// object whose members are stream, domain, val (strings without escapes),
// seq (an unsigned integer) and duplicate (true or false), each at most once,
// with JSON whitespace anywhere between tokens. ok is false for anything
// else, which parseJSON then reads.
func parseFlat(b []byte) (ack *jetstream.PubAck, ok bool) {
	p := flat{b: b}
	p.space()
	if !p.byte('{') {
		return nil, false
	}
	var a jetstream.PubAck
	var seen uint8
	p.space()
	if p.byte('}') {
		return nil, false // no PubAck member: leave it to parseJSON
	}
	for {
		p.space()
		name, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if !p.byte(':') {
			return nil, false
		}
		p.space()
		var bit uint8
		switch string(name) {
		case "stream":
			bit = 1
			s, ok := p.str()
			if !ok {
				return nil, false
			}
			a.Stream = string(s)
		case "seq":
			bit = 2
			n, ok := p.uint()
			if !ok {
				return nil, false
			}
			a.Sequence = n
		case "duplicate":
			bit = 4
			v, ok := p.boolean()
			if !ok {
				return nil, false
			}
			a.Duplicate = v
		case "domain":
			bit = 8
			s, ok := p.str()
			if !ok {
				return nil, false
			}
			a.Domain = string(s)
		case "val":
			bit = 16
			s, ok := p.str()
			if !ok {
				return nil, false
			}
			a.Value = string(s)
		default:
			return nil, false
		}
		if seen&bit != 0 {
			return nil, false // a repeated member: encoding/json's rules apply
		}
		seen |= bit
		p.space()
		if p.byte(',') {
			continue
		}
		if !p.byte('}') {
			return nil, false
		}
		p.space()
		if p.i != len(p.b) {
			return nil, false
		}
		return &a, true
	}
}

// flat is a cursor over a flat JSON object.
type flat struct {
	b []byte
	i int
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

// uint reads an unsigned integer without leading zeros that fits in uint64.
func (p *flat) uint() (uint64, bool) {
	start := p.i
	var n uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if n > (1<<64-1-d)/10 {
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
