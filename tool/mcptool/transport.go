package mcptool

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/tool"
)

// probe follows one tools/call request through the transport: whether any of
// it was written, the HTTP status the upstream answered it with, and the
// result of its response, as the upstream sent it.
type probe struct {
	key       string // the idempotency key, for the Idempotency-Key header
	effectful bool   // over HTTP: sent on a connection of its own

	sent   atomic.Bool  // some of the request was written
	status atomic.Int32 // the HTTP status of the response to the POST, 0 before
	result atomic.Pointer[json.RawMessage]
	id     jsonrpc.ID // the request's id, set by probeConn.Write

	// ctx is the call's context, caller the way back to its caller: what
	// the upstream asks or reports during the call is relayed there. token is
	// the progressToken of the request.
	ctx    context.Context
	caller tool.Caller
	token  string
	tenant string     // the call's, which what is routed to caller must be
	conn   *probeConn // set by probeConn.Write
}

// resultBytes returns the response's result, nil until one arrived.
func (p *probe) resultBytes() json.RawMessage {
	if r := p.result.Load(); r != nil {
		return *r
	}
	return nil
}

// headerProtocolVersion is the header that names the protocol version of a
// request to a Streamable HTTP server.
const headerProtocolVersion = "Mcp-Protocol-Version"

// probeKey carries a *probe in the context of a tools/call, from the body to
// probeConn.Write.
type probeKey struct{}

// armedKey carries the *probe in the context of the one Write of its request,
// from probeConn.Write to the HTTP round tripper; other requests made under the
// call's context (a notifications/cancelled, a stream resumption) do not carry
// it.
type armedKey struct{}

func probeFrom(ctx context.Context, key any) *probe {
	p, _ := ctx.Value(key).(*probe)
	return p
}

// probeTransport wraps the SDK's transport so that its connection is a
// probeConn.
type probeTransport struct {
	inner mcp.Transport
	out   *stdinWriter // stdio: the child's standard input; nil over HTTP
	conn  *probeConn   // the connection made by Connect
}

func (t *probeTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = &probeConn{Connection: c, out: t.out, waiting: map[jsonrpc.ID]*probe{}}
	return t.conn, nil
}

// probeConn watches the messages of a connection for the requests of probes:
// it marks what was written, and keeps the raw result of their responses.
type probeConn struct {
	mcp.Connection

	// out, for stdio, is the writer under the connection. Writes are
	// serialised by writeMu (the SDK serialises them too) so that out can tell
	// which request the bytes it writes belong to.
	out     *stdinWriter
	writeMu sync.Mutex

	mu      sync.Mutex // protects waiting, related and orphans
	waiting map[jsonrpc.ID]*probe
	// related maps the ids of the upstream's requests to the call on whose
	// response stream they came (HTTP only).
	related map[jsonrpc.ID]*probe
	// orphans holds, for each tenant, until when a call of its ended here
	// without the upstream's answer (its context ended, its stream broke):
	// the upstream may still be running it, and what it sends off any
	// call's stream may be that call's (see only).
	orphans map[string]time.Time
}

// orphanWindow is how long a call that ended without its answer may still
// be running upstream, as far as routing is concerned: the longest a relayed
// request may wait for its caller (bus.RelayLimits' default).
const orphanWindow = 10 * time.Minute

// Write sends msg; for the request of a probe it marks what was written.
func (c *probeConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	p := probeFrom(ctx, probeKey{})
	req, ok := msg.(*jsonrpc.Request)
	if p == nil || !ok || !req.IsCall() || req.Method != "tools/call" {
		if c.out != nil {
			c.writeMu.Lock()
			defer c.writeMu.Unlock()
		}
		return c.Connection.Write(ctx, msg)
	}
	p.id, p.conn = req.ID, c
	c.mu.Lock()
	c.waiting[req.ID] = p
	c.mu.Unlock()
	ctx = context.WithValue(ctx, armedKey{}, p)
	if c.out == nil {
		// Over HTTP the request counts as sent once the transport began
		// writing it: from then on the upstream may have enough to act.
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { p.sent.Store(true) },
		})
		return c.Connection.Write(ctx, msg)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.out.armed = p
	defer func() { c.out.armed = nil }()
	return c.Connection.Write(ctx, msg)
}

// Read receives the next message, keeping the result of a probe's response.
// The upstream's requests are answered here, relayed to the caller of the
// call they belong to or refused (see serve), and its progress and log
// notifications recorded: the SDK sees none of them.
func (c *probeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	for err == nil {
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			break
		}
		switch {
		case req.IsCall() && req.Method != "ping":
			c.serve(req)
		case req.Method == notifyProgress || req.Method == notifyMessage:
			c.notify(req, false)
		default:
			return msg, err
		}
		msg, err = c.Connection.Read(ctx)
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.mu.Lock()
		p := c.waiting[resp.ID]
		delete(c.waiting, resp.ID)
		c.mu.Unlock()
		if p != nil && resp.Error == nil && resp.Result != nil {
			r := resp.Result
			p.result.Store(&r)
		}
	}
	return msg, err
}

// forget stops waiting for p's response (the call is over). A call still
// waiting, whose request went out, ended without the upstream's answer: its
// tenant is remembered as having an orphan for orphanWindow.
func (c *probeConn) forget(p *probe) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting[p.id] == p {
		delete(c.waiting, p.id)
		if p.sent.Load() {
			if c.orphans == nil {
				c.orphans = map[string]time.Time{}
			}
			c.orphans[p.tenant] = time.Now().Add(orphanWindow)
		}
	}
}

// stdinWriter is a stdio server's standard input. It marks the probe whose
// request it is writing as sent as soon as a byte of it went through.
type stdinWriter struct {
	f *os.File
	// armed is the probe whose request is being written; guarded by the
	// probeConn's writeMu, under which every write happens.
	armed *probe
}

func (w *stdinWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	if n > 0 && w.armed != nil {
		w.armed.sent.Store(true)
	}
	return n, err
}

func (w *stdinWriter) Close() error { return w.f.Close() }

var _ io.WriteCloser = (*stdinWriter)(nil)

// roundTripper sends the HTTP requests of a Streamable HTTP upstream: it adds
// the configured headers to every request, the negotiated protocol version to
// those that lack it, and to the POST of a probe's tools/call the
// Idempotency-Key; it records the status of that POST.
type roundTripper struct {
	headers http.Header
	// version is the protocol version the live session negotiated; nil
	// while none is. The SDK's transport would send it itself, but learns it
	// only from a connection it made, and the session's connection is a
	// probeConn around it. Without it, a server takes the requests for
	// 2025-03-26 and gives their streams no event ids, so that a stream it
	// closes mid-call cannot be resumed.
	version atomic.Pointer[string]
	pooled  http.RoundTripper
	// single sends the tools/call of Effectful tools, each on a connection of
	// its own; nil when the caller supplied the client (then pooled sends all).
	single http.RoundTripper
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	for k, vs := range t.headers {
		r.Header[k] = vs
	}
	if v := t.version.Load(); v != nil && r.Header.Get(headerProtocolVersion) == "" {
		r.Header.Set(headerProtocolVersion, *v)
	}
	base := t.pooled
	p := probeFrom(req.Context(), armedKey{})
	if p != nil && req.Method != http.MethodPost {
		p = nil
	}
	if p != nil {
		if p.key != "" {
			r.Header.Set(HeaderIdempotencyKey, p.key)
		}
		// net/http re-sends a request that carries an Idempotency-Key when a
		// reused connection fails, even after the request was written; without
		// GetBody it cannot. Repeating a call is the dispatcher's decision.
		r.GetBody = nil
		if p.effectful && t.single != nil {
			base = t.single
		}
	}
	resp, err := base.RoundTrip(r)
	if p != nil && err == nil {
		p.status.Store(int32(resp.StatusCode))
		if p.conn != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			// What comes on the call's own stream is the call's.
			resp.Body = &sseTap{ReadCloser: resp.Body, p: p, conn: p.conn}
		}
	}
	return resp, err
}
