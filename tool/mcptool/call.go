package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/httptool"
)

// HeaderIdempotencyKey is the header that carries the idempotency key on the
// tools/call request to a Streamable HTTP upstream, when there is a key.
const HeaderIdempotencyKey = "Idempotency-Key"

// The names under which a tools/call request's _meta carries the call's
// identity (each only when it is not empty).
const (
	MetaPrefix         = "io.tesserix.toolexec/"
	MetaIdempotencyKey = MetaPrefix + "idempotency_key"
	MetaTenant         = MetaPrefix + "tenant"
	MetaRunID          = MetaPrefix + "run_id"
	MetaCallID         = MetaPrefix + "call_id"
)

// maxErrorText bounds the text of an upstream's error kept in a [ToolError].
const maxErrorText = 2 << 10

// Tool returns a tool declared by spec whose body calls the upstream's tool
// named remote. It does no I/O: the upstream need not list remote (see
// [Upstream.ListTools] to check). Its errors are those of [tool.New], and
// a *tool.SpecError with Field "mcp.tool" when remote is empty.
func (u *Upstream) Tool(spec tool.Spec, remote string) (*tool.Tool, error) {
	if remote == "" {
		return nil, &tool.SpecError{Tool: spec.Name, Field: "mcp.tool", Msg: "is empty"}
	}
	effectful := spec.Idempotency != nil && spec.Idempotency.Kind == tool.Effectful
	return tool.New(spec, func(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error) {
		return u.call(ctx, tc, remote, effectful, args)
	})
}

// call is the body of an MCP tool: one tools/call, classified. A call that
// failed before anything of it reached the upstream, because the session it
// used had ended (a process that died between calls, an HTTP session the
// server forgot), is tried once more on a new session.
func (u *Upstream) call(ctx context.Context, tc tool.Context, remote string, effectful bool, args json.RawMessage) (string, error) {
	for attempt := 1; ; attempt++ {
		s, err := u.session(ctx)
		if err != nil {
			return "", tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q: %w", ErrNotSent, u.cfg.Name, remote, err))
		}
		out, stale, err := u.callOn(ctx, s, tc, remote, effectful, args)
		if stale {
			u.end(s)
			if attempt == 1 && ctx.Err() == nil {
				continue
			}
		}
		return out, err
	}
}

// callOn makes one tools/call on s. stale reports that it failed because the
// session is no longer usable, without any effect.
func (u *Upstream) callOn(
	ctx context.Context, s *session, tc tool.Context, remote string, effectful bool, args json.RawMessage,
) (out string, stale bool, err error) {
	var arguments any = args
	if len(bytes.TrimSpace(args)) == 0 {
		arguments = map[string]any{}
	}
	// Ended when the call returns: a stream the SDK still reads after the
	// answer (a resumed GET the upstream keeps open) is let go.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	params := &mcp.CallToolParams{Name: remote, Arguments: arguments, Meta: meta(tc)}
	token := "toolexec-" + tc.CallID
	params.SetProgressToken(token)
	params.Meta[mcp.MetaKeyLogLevel] = relayedLogLevel
	for round := 1; ; round++ {
		p := &probe{key: tc.IdempotencyKey, effectful: effectful, ctx: ctx, caller: tool.CallerFrom(ctx), token: token, tenant: tc.Tenant}
		res, err := s.cs.CallTool(context.WithValue(ctx, probeKey{}, p), params)
		s.conn.forget(p)
		raw := p.resultBytes()
		if raw != nil || p.status.Load() != 0 || (err != nil && rpcAnswer(err)) {
			s.answered.Store(true) // the server is alive enough to answer
		}
		if raw == nil && err == nil {
			// The SDK decoded an answer this probe did not see; take it as decoded.
			if raw, err = json.Marshal(res); err != nil {
				return "", false, fmt.Errorf("mcp server %q: tools/call %q: the answer cannot be read: %w", u.cfg.Name, remote, err)
			}
		}
		if raw == nil {
			return u.classify(ctx, s, remote, p, err)
		}
		// The upstream answered: whatever the SDK made of it, the answer
		// decides.
		if !needsInput(raw) || round > maxInputRoundTrips {
			out, err := u.outcome(remote, raw)
			return out, false, err
		}
		// It needs input first (multi round-trip requests): the caller is
		// asked, and the call sent again with the answers, as the upstream
		// asked. It has not proceeded, so a failure here is without effect.
		responses, state, err := u.fulfil(ctx, tc, remote, raw)
		if err != nil {
			return "", false, err
		}
		b, err := json.Marshal(responses)
		if err != nil {
			return "", false, tool.NoEffect(fmt.Errorf("mcp server %q: tools/call %q: %w", u.cfg.Name, remote, err))
		}
		next := *params
		if err := json.Unmarshal(b, &next.InputResponses); err != nil {
			return "", false, tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q: the caller's answer cannot be sent: %w",
				ErrInputRequired, u.cfg.Name, remote, err))
		}
		next.RequestState = state
		params = &next
	}
}

// needsInput reports whether a tools/call result is input-required.
func needsInput(raw json.RawMessage) bool {
	var r struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(raw, &r) == nil && r.ResultType == "input_required"
}

// meta is the _meta of a tools/call for tc.
func meta(tc tool.Context) mcp.Meta {
	m := mcp.Meta{}
	for k, v := range map[string]string{
		MetaIdempotencyKey: tc.IdempotencyKey, MetaTenant: tc.Tenant, MetaRunID: tc.RunID, MetaCallID: tc.CallID,
	} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// classify turns a tools/call on s that got no result into the body's error:
// "no effect" when nothing was sent or the upstream refused the request before
// running it, an unknown outcome (a plain error) otherwise. stale reports that
// s is broken and the call may be tried on a new session.
func (u *Upstream) classify(ctx context.Context, s *session, remote string, p *probe, err error) (out string, stale bool, _ error) {
	what := fmt.Sprintf("mcp server %q: tools/call %q", u.cfg.Name, remote)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", err, cerr)
	}
	if !p.sent.Load() {
		// Nothing of the request was written: the upstream cannot have acted.
		// Unless the caller gave up, a closed connection or a stdio server's
		// broken pipe is what failed. (An HTTP request that could not be sent
		// says nothing of the session, whose other calls go on.)
		// A connection refused over HTTP says the same of the server: the
		// session is ended, so that the supervisor finds whether it can be
		// reached again (and the call is tried once more, or fails as the
		// upstream being down).
		stale = ctx.Err() == nil && (s.proc != nil || s.isEnded() || errors.Is(err, mcp.ErrConnectionClosed) || dialFailed(err))
		return "", stale, tool.NoEffect(fmt.Errorf("%w: %s: %w", ErrNotSent, what, u.redact(err)))
	}
	err = u.redact(err)
	if code := int(p.status.Load()); code != 0 && (code < 200 || code > 299) {
		serr := fmt.Errorf("%s: %w (%w)", what,
			&httptool.StatusError{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code))}, err)
		if httptool.RefusedStatus(code) {
			// 404 on a session is how a server says it forgot it: a new one
			// is needed, and the call may be tried on it. (A sessionless
			// server's 404 says nothing of the calls in flight beside it.)
			return "", code == http.StatusNotFound && s.cs.ID() != "", tool.NoEffect(serr)
		}
		return "", false, serr
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		rerr := &RPCError{Upstream: u.cfg.Name, Tool: remote, Code: we.Code, Message: we.Message}
		if RefusedCode(we.Code) {
			return "", false, tool.NoEffect(rerr)
		}
		return "", false, rerr
	}
	return "", false, fmt.Errorf("%s: %w", what, err)
}

// dialFailed reports whether err is a failure to connect to the server.
func dialFailed(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// wireResult is the part of a tools/call result that decides the outcome,
// read from the bytes the upstream sent.
type wireResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	IsError           bool              `json:"isError"`
	ResultType        string            `json:"resultType"`
}

// outcome turns the result the upstream sent into the tool's outcome, or its
// error (see the package documentation).
func (u *Upstream) outcome(remote string, raw json.RawMessage) (string, error) {
	var r wireResult
	if err := json.Unmarshal(raw, &r); err != nil {
		// It answered, so it may have acted: the outcome is unknown.
		return "", fmt.Errorf("mcp server %q: tools/call %q: the answer is not a tool result: %w", u.cfg.Name, remote, err)
	}
	if r.ResultType == "input_required" {
		return "", tool.NoEffect(fmt.Errorf("%w: mcp server %q: tools/call %q", ErrInputRequired, u.cfg.Name, remote))
	}
	text, allText, err := contentText(r.Content)
	if err != nil {
		return "", fmt.Errorf("mcp server %q: tools/call %q: %w", u.cfg.Name, remote, err)
	}
	if r.IsError {
		if len(text) > maxErrorText {
			text = strings.ToValidUTF8(text[:maxErrorText], "") + "…"
		}
		return "", tool.NoEffect(&ToolError{Upstream: u.cfg.Name, Tool: remote, Message: text})
	}
	if !allText {
		out, err := ContentOutcome(r.Content, r.StructuredContent, u.cfg.MaxContentBytes)
		if err != nil {
			return "", fmt.Errorf("mcp server %q: tools/call %q: %w", u.cfg.Name, remote, err)
		}
		return out, nil
	}
	if sc := bytes.TrimSpace(r.StructuredContent); len(sc) > 0 && !bytes.Equal(sc, []byte("null")) {
		var b bytes.Buffer
		if err := json.Compact(&b, sc); err != nil {
			return "", fmt.Errorf("mcp server %q: tools/call %q: structuredContent: %w", u.cfg.Name, remote, err)
		}
		return b.String(), nil
	}
	return text, nil
}

// contentText renders a result's content: the texts joined with newlines when
// every item is text (so "" for none, and allText true), else the JSON of the
// whole list.
func contentText(content []json.RawMessage) (text string, allText bool, _ error) {
	texts := make([]string, 0, len(content))
	for _, c := range content {
		var item struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(c, &item); err != nil {
			return "", false, fmt.Errorf("content: %w", err)
		}
		if item.Type != "text" || item.Text == nil {
			list, err := json.Marshal(content)
			if err != nil {
				return "", false, fmt.Errorf("content: %w", err)
			}
			var b bytes.Buffer
			if err := json.Compact(&b, list); err != nil {
				return "", false, fmt.Errorf("content: %w", err)
			}
			return b.String(), false, nil
		}
		texts = append(texts, *item.Text)
	}
	return strings.Join(texts, "\n"), true, nil
}
