package mcptool

import (
	"errors"
	"fmt"

	"github.com/tesserix/toolexec/tool"
)

// Errors returned by [Open] and by the bodies of MCP tools.
var (
	// ErrInvalidConfig is matched by every [*ConfigError].
	ErrInvalidConfig = errors.New("mcptool: invalid upstream configuration")
	// ErrNotSent is matched when nothing of a tools/call request reached the
	// upstream: it could not be started or connected, or the request could not
	// be written. Such errors are also wrapped with [tool.NoEffect].
	ErrNotSent = errors.New("mcptool: request not sent")
	// ErrUnavailable is matched when the upstream could not be started or
	// connected (its process did not start, the connection was refused, the
	// initialize handshake failed), and while it is down (see [StateDown]).
	// It also matches tool.ErrUnavailable, so that the dispatcher answers
	// such a call rejected upstream_unavailable.
	ErrUnavailable error = unavailableError{}
	// ErrClosed is matched once the [Upstream] has been closed.
	ErrClosed = errors.New("mcptool: upstream closed")
	// ErrInputRequired is matched when the upstream answered a call with an
	// input-required result (it asks the client for elicitation, sampling or
	// roots before it proceeds), which a tool run by toolexec cannot give. Such
	// errors are wrapped with [tool.NoEffect].
	ErrInputRequired = errors.New("mcptool: the upstream asked for input")
	// ErrUnknownTool is matched when an import names a tool the upstream does
	// not list.
	ErrUnknownTool = errors.New("mcptool: the upstream lists no such tool")
	// ErrBadName is matched when an imported tool's name (with its prefix) is
	// not a toolexec tool name, [A-Za-z0-9_-]{1,128}.
	ErrBadName = errors.New("mcptool: not a toolexec tool name")
)

// unavailableError is the type of ErrUnavailable.
type unavailableError struct{}

func (unavailableError) Error() string { return "mcptool: upstream unavailable" }

// Is matches tool.ErrUnavailable.
func (unavailableError) Is(target error) bool { return target == tool.ErrUnavailable }

// ConfigError refuses an upstream's configuration. It matches
// [ErrInvalidConfig].
type ConfigError struct {
	// Upstream is the configuration's Name.
	Upstream string
	// Field is the configuration field at fault, as the tools file names it:
	// "name", "command", "env", "dir", "url", "headers" or "timeouts".
	Field string
	// Msg says what is wrong. It never repeats a header value or an
	// environment value, which may hold secrets.
	Msg string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("mcp server %q: %s: %s", e.Upstream, e.Field, e.Msg)
}

// Is matches ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// ToolError is the answer of an upstream that ran a call and reported it
// failed (a result with isError: true). The body wraps it with
// [tool.NoEffect]: the upstream answered that the call failed.
type ToolError struct {
	// Upstream is the upstream's name; Tool the name of its tool.
	Upstream, Tool string
	// Message is the result's text content (joined with newlines), or the JSON
	// of its content when that is not all text; at most 2 KiB of it.
	Message string
}

func (e *ToolError) Error() string {
	msg := fmt.Sprintf("mcp server %q: tool %q answered with an error", e.Upstream, e.Tool)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// RPCError is a JSON-RPC error response to a tools/call request. The body
// wraps it with [tool.NoEffect] when [RefusedCode] reports that its code
// refuses the request before it runs.
type RPCError struct {
	// Upstream is the upstream's name; Tool the name of its tool.
	Upstream, Tool string
	// Code and Message are the JSON-RPC error's.
	Code    int64
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("mcp server %q: tools/call %q: JSON-RPC error %d: %s", e.Upstream, e.Tool, e.Code, e.Message)
}

// ImportError is one tool an import could not bring in.
type ImportError struct {
	// Upstream is the upstream's name; Tool the tool's name on the upstream.
	Upstream, Tool string
	// Err says why: it matches [ErrUnknownTool], [ErrBadName], or is the
	// [*tool.SpecError] refusing the declaration.
	Err error
}

func (e *ImportError) Error() string {
	return fmt.Sprintf("mcp server %q: import: tool %q: %v", e.Upstream, e.Tool, e.Err)
}

// Unwrap returns the reason.
func (e *ImportError) Unwrap() error { return e.Err }

// RefusedCode reports whether a JSON-RPC error code says the upstream refused
// a request before running it: parse error (-32700), invalid request (-32600),
// method not found (-32601) and invalid params (-32602, which is also what
// servers answer for an unknown tool). Every other code, -32603 internal error
// and the server-defined codes included, may come from a tool that failed
// after it acted.
func RefusedCode(code int64) bool {
	switch code {
	case -32700, -32600, -32601, -32602:
		return true
	}
	return false
}

var (
	_ error = (*ConfigError)(nil)
	_ error = (*ToolError)(nil)
	_ error = (*RPCError)(nil)
	_ error = (*ImportError)(nil)
)
