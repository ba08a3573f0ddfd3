package natstool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/tool"
)

// Defaults of an [Endpoint] and of the declarations of tools served over NATS.
const (
	// DefaultMaxReplyBytes bounds a reply's payload: 512 KiB, the dispatcher's
	// default bound on an outcome.
	DefaultMaxReplyBytes = 512 << 10
	// DefaultTimeout bounds the body of a tool declared without a timeout.
	DefaultTimeout = 30 * time.Second
)

// The status header of the server's no-responders reply, and the service
// API's error headers.
const (
	headerStatus       = "Status"
	statusNoResponders = "503"
	headerErrorCode    = micro.ErrorCodeHeader
	headerError        = micro.ErrorHeader
)

// pingTimeout bounds the round trip behind a request.
const pingTimeout = 10 * time.Second

// Endpoint says where a NATS tool sends its requests.
type Endpoint struct {
	// Conn sends the requests. Required.
	Conn *nats.Conn
	// Subject is where the requests go; empty means toolexec.body.<tool>
	// (wire.BodySubject). It must be a subject without wildcards.
	Subject string
	// MaxReplyBytes bounds the reply's payload read as the outcome; zero means
	// DefaultMaxReplyBytes.
	MaxReplyBytes int64
	// OnExtraReply, when set, is called (on a goroutine of its own) for a
	// request that got more than one reply within ExtraReplyWindow of its
	// first: more than one group of workers serves the subject — a worker
	// subscribed outside the queue group toolexec.body, or one in the
	// executors' account besides the workers' import — so the body ran more
	// than once. The call's outcome is the first reply's; this is how the
	// operator hears of the others.
	OnExtraReply func(subject string)
}

// ExtraReplyWindow is how long a request's reply subject is kept after its
// first reply, when [Endpoint.OnExtraReply] is set, to hear a second.
const ExtraReplyWindow = 2 * time.Second

// New checks the endpoint and returns a tool declared by spec whose body
// sends each call to the workers serving it; a spec without a timeout gets
// DefaultTimeout. It returns an error matching [tool.ErrInvalidSpec] when the
// declaration is refused by [tool.New], or when the endpoint is: a
// *tool.SpecError whose Field is "nats.conn" (none), "nats.subject" (not a
// subject one can publish to) or "nats.max_reply_bytes" (negative).
func New(spec tool.Spec, ep Endpoint) (*tool.Tool, error) {
	c, err := compile(spec.Name, ep, true)
	if err != nil {
		return nil, err
	}
	if spec.Timeout == 0 {
		spec.Timeout = DefaultTimeout
	}
	return tool.New(spec, c.call)
}

// CheckEndpoint checks what [New] checks of an endpoint, but the connection:
// a subject one can publish to (when one is given) and a bound that is not
// negative. Its errors are New's.
func CheckEndpoint(name string, ep Endpoint) error {
	_, err := compile(name, ep, false)
	return err
}

// compiled is a checked endpoint, ready to send.
type compiled struct {
	nc      *nats.Conn
	subject string
	max     int64
	onExtra func(subject string)
}

// compile checks ep for the tool called name, its connection too with conn.
func compile(name string, ep Endpoint, conn bool) (*compiled, error) {
	bad := func(field, msg string) error { return &tool.SpecError{Tool: name, Field: field, Msg: msg} }
	c := &compiled{nc: ep.Conn, subject: ep.Subject, max: ep.MaxReplyBytes, onExtra: ep.OnExtraReply}
	if conn && c.nc == nil {
		return nil, bad("nats.conn", "is required")
	}
	if c.subject == "" {
		c.subject = wire.BodySubject(name)
	} else if err := CheckSubject(c.subject); err != nil {
		return nil, bad("nats.subject", err.Error())
	}
	switch {
	case c.max == 0:
		c.max = DefaultMaxReplyBytes
	case c.max < 0:
		return nil, bad("nats.max_reply_bytes", "is negative")
	}
	return c, nil
}

// CheckSubject returns an error unless s is a subject one can publish to:
// tokens of printable characters other than space, separated by single dots,
// without the wildcards * and >.
func CheckSubject(s string) error {
	if s == "" {
		return errors.New("is empty")
	}
	for i, tok := range strings.Split(s, ".") {
		if tok == "" {
			return fmt.Errorf("%q has an empty token (at %d)", s, i)
		}
		for _, r := range tok {
			if r <= ' ' || r == 0x7f || r == '*' || r == '>' {
				return fmt.Errorf("%q holds %q: a subject to publish to has no wildcards, spaces or control characters", s, r)
			}
		}
	}
	return nil
}

// notSent lists the errors with which nats.Conn.PublishMsg refuses a message
// before writing any of it; any other error may come from a write to the
// socket that failed half-way.
var notSent = []error{
	nats.ErrInvalidConnection, nats.ErrBadSubject, nats.ErrHeadersNotSupported, nats.ErrConnectionClosed,
	nats.ErrConnectionDraining, nats.ErrMaxPayload, nats.ErrReconnectBufExceeded, nats.ErrInvalidMsg,
}

// call is the tool's body: one request, classified.
func (c *compiled) call(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error) {
	if st := c.nc.Status(); st != nats.CONNECTED {
		return "", tool.NoEffect(fmt.Errorf("%w: %s: the connection is %s", ErrNotSent, c.subject, strings.ToLower(st.String())))
	}
	// Statuses first: a disconnection at any point after this may have lost
	// the request or its reply.
	lost := c.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer c.nc.RemoveStatusListener(lost)
	replies := repliesOf(c.nc)
	if err := replies.open(); err != nil {
		return "", tool.NoEffect(fmt.Errorf("%w: %s: subscribing to the reply subjects: %w", ErrNotSent, c.subject, err))
	}
	inbox, w := replies.add(c.subject, c.onExtra)
	replied := false
	defer func() { replies.done(inbox, w, replied) }()

	if err := ctx.Err(); err != nil {
		return "", tool.NoEffect(fmt.Errorf("%w: %s: %w", ErrNotSent, c.subject, err))
	}
	msg := &nats.Msg{Subject: c.subject, Reply: inbox, Data: args, Header: headers(tc)}
	if err := c.nc.PublishMsg(msg); err != nil {
		for _, ns := range notSent {
			if errors.Is(err, ns) {
				return "", tool.NoEffect(fmt.Errorf("%w: %s: %w", ErrNotSent, c.subject, err))
			}
		}
		return "", fmt.Errorf("%s: publishing the request: %w", c.subject, err)
	}

	// The server handles the request before the PING behind it: a
	// no-responders status it sends for the request is in hand by the PONG.
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err := c.nc.FlushWithContext(pctx)
	cancel()
	if err != nil {
		return "", c.unknown(ctx, fmt.Errorf("%s: the request went out, and the round trip behind it failed: %w", c.subject, err))
	}
	replies.caughtUp()
	select {
	case m := <-w.first:
		if noResponders(m) {
			return "", tool.NoEffect(fmt.Errorf("%w: %s: %w", ErrNoWorker, c.subject, nats.ErrNoResponders))
		}
		replied = true
		return c.classify(m)
	default:
	}

	select {
	case m := <-w.first:
		if noResponders(m) {
			return "", fmt.Errorf(
				"%s: a no-responders status came after the request was delivered, which the server never sends: the effect is unknown", c.subject)
		}
		replied = true
		return c.classify(m)
	case st := <-lost:
		return "", fmt.Errorf("%s: the connection was %s while the request was out: a reply sent meanwhile is lost, the effect unknown",
			c.subject, strings.ToLower(st.String()))
	case <-ctx.Done():
		return "", fmt.Errorf("%s: no reply: %w", c.subject, ctx.Err())
	}
}

// unknown returns err, naming ctx's error when ctx ended.
func (c *compiled) unknown(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// noResponders reports whether m is the server's no-responders status.
func noResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get(headerStatus) == statusNoResponders
}

// classify turns a worker's reply into the outcome or the body's error.
func (c *compiled) classify(m *nats.Msg) (string, error) {
	if code := m.Header.Get(headerErrorCode); code != "" {
		berr := newBodyError(code, m.Header.Get(headerError))
		err := fmt.Errorf("%s: %w", c.subject, berr)
		if code == CodeNoEffect {
			return "", tool.NoEffect(err)
		}
		return "", err
	}
	if int64(len(m.Data)) > c.max {
		return "", fmt.Errorf("%w: %s answered %d bytes, more than %d", ErrReplyTooLarge, c.subject, len(m.Data), c.max)
	}
	return string(m.Data), nil
}

// headers returns the request's headers for the call tc (tool.Context.Headers).
func headers(tc tool.Context) nats.Header {
	h := nats.Header{}
	for _, kv := range tc.Headers() {
		h[kv[0]] = []string{kv[1]}
	}
	return h
}

// Pending is a NATS tool declared before its connection exists (a tools
// file is read before the executor connects): [Pending.Build] makes it.
type Pending struct {
	// Spec is the tool's declaration.
	Spec tool.Spec
	// Endpoint is where its requests go; Build sets its Conn.
	Endpoint Endpoint
}

// Build returns the tool, sending its requests on nc; its errors are New's.
func (p Pending) Build(nc *nats.Conn) (*tool.Tool, error) {
	ep := p.Endpoint
	ep.Conn = nc
	return New(p.Spec, ep)
}

// Subject returns the subject the tool's requests go to.
func (p Pending) Subject() string {
	if p.Endpoint.Subject != "" {
		return p.Endpoint.Subject
	}
	return wire.BodySubject(p.Spec.Name)
}
